"""Where an agent's commands run: the ``[sandbox]`` table made real (docs/security.md#the-sandbox: the
stronger of the agent's and the stage's wins; a tool script's ``shell`` runs in it too,
docs/rhai.md#host-functions; issue 12 item 4).

The ONE home of the sandbox rule, shared by the shell tool, command seeds and a script's ``shell()``:

- :func:`resolve` folds the agent's and a stage's ``[sandbox]`` into one :class:`SandboxSpec` (the
  stronger kind wins; network only when both allow it; ``on_unavailable = "error"`` if either says so).
- :func:`choose` picks the backend this machine offers for a spec: ``namespace`` runs in bubblewrap
  (``bwrap`` on PATH, probed once); ``container`` runs in podman or docker (the ``engine`` key picks
  one; the runtime must answer ``info``), else bubblewrap when ``on_unavailable = "warn"``. What is
  missing is said in :attr:`Choice.reason`; a required sandbox that cannot be had is
  :attr:`Choice.refused`.
- :class:`Sandbox` wraps one command line for the chosen backend. Inside: the working directory
  read-write; the system folders (``/usr``, ``/etc``, ``/opt``, the ``/bin``-style links) read-only;
  every other path (homes, other projects, ``$LEV_HOME`` and its run records) absent, and any
  ``hidden`` path inside the working directory (the run record, when ``LEV_HOME`` lies there)
  covered by an empty folder; ``mount`` entries added (read-only unless ``:rw``); a fresh ``/tmp``
  per command (``persist = true``: one per run, kept between commands); no network unless
  ``network = true``; the environment without credentials (:mod:`lev_nb.secrets`).

This module imports nothing of lev_nb but :mod:`lev_nb.secrets` (a bottom layer); it reads a
``[sandbox]`` table through its attributes, so any object shaped like ``blueprint.Sandbox`` works.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from lev_nb.environ import env_value
from lev_nb.records import record
from lev_nb.secrets import child_environment

Kind = Literal["none", "namespace", "container"]
_RANK = {"none": 0, "namespace": 1, "container": 2}
CONTAINER_ENGINES = ("podman", "docker")
# System folders a sandboxed command may read (never write): programs, libraries, configuration.
SYSTEM_READ_ONLY = ("/usr", "/etc", "/opt")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64")
# Files under /etc that hold secrets of the machine: covered even though /etc is readable.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
PROBE_TIMEOUT_S = 10.0

__all__ = [
    "Choice", "Mount", "MountGrant", "Sandbox", "SandboxError", "SandboxSpec", "Sandboxes", "choose", "describe",
    "mount_problems", "parse_mount", "split_mount", "resolve", "shell_argv", "under",
]


class SandboxError(RuntimeError):
    """A sandbox that cannot be set up as asked without showing what must stay hidden."""


@record
class SandboxSpec:
    """One resolved ``[sandbox]``: what the commands of a stage (or the seeds) must run in."""

    kind: Kind = "none"
    network: bool = True
    mount: tuple[str, ...] = ()
    persist: bool = False
    image: str | None = None
    engine: str | None = None
    on_unavailable: Literal["error", "warn"] = "error"

    @property
    def isolated(self) -> bool:
        """True when the spec asks for anything but the host."""
        return self.kind != "none"

    @classmethod
    def of(cls, table: Any) -> SandboxSpec:
        """The spec of one ``[sandbox]`` table (None, or an empty block: the host). The machine-wide
        table of ``config.toml`` names its mounts ``mounts``, as the upstream does."""
        if table is None:
            return cls()
        return cls(
            kind=getattr(table, "kind", None) or "none",
            network=bool(getattr(table, "network", True)),
            mount=tuple(getattr(table, "mount", None) or getattr(table, "mounts", ()) or ()),
            persist=bool(getattr(table, "persist", False)),
            image=getattr(table, "image", None),
            engine=getattr(table, "engine", None),
            on_unavailable=getattr(table, "on_unavailable", "error") or "error",
        )


def under(spec: SandboxSpec, floor: SandboxSpec) -> SandboxSpec:
    """``spec`` (a blueprint's, resolved) under the machine-wide ``[sandbox]`` of the user's
    configuration: a blueprint may pick a stronger sandbox, never a weaker one (upstream
    ``security.md``). The stronger kind wins with its image and mounts (the machine's on a tie, and
    its engine whenever it names one, since the engine runs on the host); network only when both
    allow it; required when either requires it."""
    if not floor.isolated:
        return spec
    base = spec if _RANK[spec.kind] > _RANK[floor.kind] else floor
    required = any(t.isolated and t.on_unavailable == "error" for t in (spec, floor))
    return SandboxSpec(
        kind=base.kind, network=spec.network and floor.network, mount=base.mount,
        persist=base.persist, image=base.image or floor.image, engine=floor.engine or base.engine,
        on_unavailable="error" if required else "warn",
    )


def resolve(agent: Any, stage: Any = None) -> SandboxSpec:
    """The sandbox in force for a stage: the stronger of the agent's and the stage's ``[sandbox]``.

    The stronger kind wins (container > namespace > none) and brings its image, engine, mounts and
    persist; on a tie the stage's. Network is on only when neither turns it off, and a sandbox is
    required (``error``) when either requires it.
    """
    a, s = SandboxSpec.of(agent), SandboxSpec.of(stage)
    if agent is None:
        return s
    if stage is None:
        return a
    base = s if _RANK[s.kind] >= _RANK[a.kind] else a
    required = any(t.isolated and t.on_unavailable == "error" for t in (a, s))
    return SandboxSpec(
        kind=base.kind, network=a.network and s.network, mount=base.mount, persist=base.persist,
        image=base.image, engine=base.engine, on_unavailable="error" if required else "warn",
    )


# --------------------------------------------------------------------------------------------------
# what this machine offers

_probe_lock = threading.Lock()
_probes: dict[tuple[str, ...], bool] = {}


def _probe(argv: tuple[str, ...]) -> bool:
    """Whether ``argv`` runs and exits 0 (once per argv and process: a probe costs a process)."""
    import subprocess  # here: reading a configuration imports this module, and probes are rarer

    with _probe_lock:
        known = _probes.get(argv)
        if known is not None:
            return known
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S, check=False)
            ok = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        _probes[argv] = ok
        return ok


def _bwrap(path: str | None) -> tuple[str | None, str]:
    """bubblewrap's path if it is on ``path`` and can create a sandbox here, else why not."""
    import shutil

    found = shutil.which("bwrap", path=path)
    if found is None:
        return None, "bubblewrap (bwrap) is not on PATH"
    # The isolation every sandboxed command gets (network off: the most namespaces), on `true`.
    probe = (found, *_isolation(network=False), "--tmpfs", "/tmp", "--", "/bin/sh", "-c", "true")
    if not _probe(probe):
        return None, f"{found} cannot create a sandbox on this machine (user namespaces may be off)"
    return found, ""


def _container(engine: str | None, path: str | None) -> tuple[str | None, str]:
    """A container runtime (``engine``, else podman then docker) that answers ``info``, else why not."""
    import shutil

    names = (engine,) if engine else CONTAINER_ENGINES
    reasons = []
    for name in names:
        found = shutil.which(name, path=path)
        if found is None:
            reasons.append(f"{name} is not on PATH")
        elif not _probe((found, "info")):
            reasons.append(f"{name} is installed but does not answer (is its daemon running?)")
        else:
            return found, ""
    return None, "; ".join(reasons)


@record
class Choice:
    """The backend a spec gets on this machine.

    ``backend`` is ``"host"``, ``"bwrap"``, ``"podman"`` or ``"docker"``; ``program`` its path;
    ``reason`` why the asked-for isolation is not what runs (empty when it is); ``refused`` True when
    the spec requires isolation this machine cannot give (the run must not start).
    """

    spec: SandboxSpec
    backend: str
    program: str | None = None
    reason: str = ""

    @property
    def refused(self) -> bool:
        return bool(self.reason) and self.spec.on_unavailable == "error"

    @property
    def degraded(self) -> bool:
        """True when the commands run with less isolation than the spec asks for (a warning)."""
        return bool(self.reason) and not self.refused


def choose(spec: SandboxSpec, environ: Mapping[str, str] | None = None) -> Choice:
    """The backend ``spec`` runs on with this machine's programs (looked up on ``environ['PATH']``)."""
    path = env_value("PATH") if environ is None else environ.get("PATH")
    if spec.kind == "none":
        return Choice(spec, "host")
    if spec.kind == "container":
        if spec.image:
            program, why = _container(spec.engine, path)
        else:
            program, why = None, 'kind = "container" names no image'
        if program is not None:
            name = Path(program).name
            return Choice(spec, name if name in CONTAINER_ENGINES else "docker", program)
        if spec.on_unavailable == "warn":
            fallback, why_not = _bwrap(path)
            if fallback is not None:
                return Choice(spec, "bwrap", fallback, f"no container ({why}); bubblewrap is used instead")
            return Choice(spec, "host", None, f"no container ({why}) and {why_not}")
        return Choice(spec, "host", None, f"no container: {why}")
    program, why = _bwrap(path)
    if program is not None:
        return Choice(spec, "bwrap", program)
    return Choice(spec, "host", None, why)


def describe(choice: Choice) -> str:
    """One sentence: where the commands will run, and what they see there."""
    spec = choice.spec
    net = "network on" if spec.network else "no network"
    if choice.backend == "host":
        return "on the host, with no isolation"
    if choice.backend == "bwrap":
        what = "bubblewrap"
    else:
        what = f"{choice.backend} (image {spec.image})"
    seen = "the working directory read-write, system folders read-only"
    if spec.mount:
        seen += ", " + ", ".join(_shown(entry) for entry in spec.mount)
    return (f"in {what} ({choice.program}): {seen}, the rest of the filesystem hidden "
            f"($LEV_HOME, the run records and the configuration too, even inside a mount), {net}, "
            "no credential variables")


def _shown(entry: str) -> str:
    """How one mount entry reads in :func:`describe` ("/data at /mnt/data read-only")."""
    source, target, writable = split_mount(entry)
    mode = "read-write" if writable else "read-only"
    return f"{source} {mode}" if source == target else f"{source} at {target} {mode}"


# --------------------------------------------------------------------------------------------------
# wrapping a command


def _isolation(network: bool) -> list[str]:
    """bubblewrap's options for the namespaces and the read-only system view of every command."""
    args = ["--die-with-parent", "--unshare-user-try", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        args.append("--unshare-net")
    args += _system_binds()
    for secret in SYSTEM_SECRETS:
        if os.path.exists(secret):
            args += ["--ro-bind", "/dev/null", secret]
    return args + ["--proc", "/proc", "--dev", "/dev"]


# bubblewrap's options that point a command's temporary files at the sandbox's own /tmp. The host's
# folder (TMPDIR: a per-user folder under /tmp, as Debian's pam_tmpdir sets, or one in the home
# folder) is not there inside, where /tmp is the sandbox's own: mktemp failed in every command.
SCRATCH_ENV = ("--setenv", "TMPDIR", "/tmp", "--unsetenv", "TMP", "--unsetenv", "TEMP", "--unsetenv", "TEMPDIR")


def _system_binds() -> list[str]:
    args: list[str] = []
    for folder in SYSTEM_LINKS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for folder in SYSTEM_READ_ONLY:
        if os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    return args


@record
class Mount:
    """One ``mount`` entry made concrete: the host ``source`` (symlinks followed), where it appears
    inside the sandbox (``target``), whether it is writable, and the ``entry`` as written."""

    entry: str
    source: Path
    target: Path
    writable: bool


def split_mount(entry: str) -> tuple[str, str, bool]:
    """The text of one ``mount`` entry: ``(source, target, writable)``. ``PATH`` or ``SRC:DST``,
    with ``:ro`` (the default) or ``:rw`` last; the target of ``PATH`` is the path itself."""
    parts = entry.split(":")
    writable = False
    if len(parts) > 1 and parts[-1] in ("ro", "rw"):
        writable = parts.pop() == "rw"
    return parts[0], parts[1] if len(parts) > 1 else parts[0], writable


def parse_mount(entry: str, workdir: Path) -> Mount:
    """One ``mount`` entry made concrete (:func:`split_mount`): ``~`` is expanded and a relative path
    is taken from the workdir. The source is resolved the way the kernel will bind it (every symlink
    followed), so a link cannot disguise what it shows."""
    source, target, writable = split_mount(entry)
    src = Path(source).expanduser()
    src = src if src.is_absolute() else workdir / src
    dst = Path(target).expanduser()
    dst = dst if dst.is_absolute() else workdir / dst
    return Mount(entry, src.resolve(), Path(os.path.normpath(dst)), writable)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both already resolved)."""
    return path == folder or folder in path.parents


MountGrant = Callable[[Mount], bool]


def mount_problems(spec: SandboxSpec, workdir: Path, hidden: Iterable[Path],
                   granted: MountGrant | None = None) -> list[str]:
    """Why the ``mount`` entries of ``spec`` cannot be honoured, one sentence each (empty: all fine).

    The rule, in one place: a mount may never show what lev_nb keeps from commands (``hidden``:
    ``$LEV_HOME``, the run records, the user's configuration), so a source inside one of those is
    refused (one that merely *contains* one is fine: the hidden part is covered inside the sandbox);
    a mount may not replace the sandbox's root; and a source outside the working directory needs
    the user's grant (``granted``; None grants nothing), read-only and read-write alike.
    """
    work = Path(workdir).resolve()
    secret = [Path(h).resolve() for h in hidden]
    problems = []
    for entry in spec.mount:
        mount = parse_mount(entry, work)
        where = f"mount '{entry}'"
        if mount.target == Path("/"):
            problems.append(f"{where} would replace the whole filesystem of the sandbox")
            continue
        system = next((s for s in SYSTEM_READ_ONLY if _inside(mount.target, Path(s))), None)
        if system is not None and not mount.target.is_dir():
            # The system folders are bound read-only, so a mount point cannot be made in them.
            problems.append(f"{where} targets {mount.target}, inside {system}, which is read-only in the sandbox "
                            "and has no such folder; choose a target such as /mnt/NAME")
            continue
        # Part of the working directory is fine even when the workdir itself lies in $LEV_HOME.
        exposed = next((h for h in secret if _inside(mount.source, h) and not _inside(mount.source, work)), None)
        if exposed is not None:
            problems.append(f"{where} would show {exposed}, which lev_nb keeps hidden from commands "
                            "(its run records and configuration)")
            continue
        if _inside(mount.source, work):
            continue
        if granted is None or not granted(mount):
            mode = "read-write" if mount.writable else "read-only"
            problems.append(f"{where} shows {mount.source} ({mode}), outside the working directory, "
                            "and the user's configuration does not grant it")
    return problems


def _bwrap_bind(mount: Mount) -> list[str]:
    return ["--bind-try" if mount.writable else "--ro-bind-try", str(mount.source), str(mount.target)]


def _bwrap_cover(path: str, folder: bool) -> list[str]:
    return ["--tmpfs", path] if folder else ["--ro-bind", "/dev/null", path]


@record(frozen=False)
class Sandbox:
    """One run's sandbox for one spec: wraps command lines (``argv``) for the chosen backend.

    ``hidden`` are paths that must not be reachable from inside even when they lie in the working
    directory (the run record). Call :meth:`close` when the run ends (it removes a persisted /tmp).
    """

    choice: Choice
    workdir: Path
    hidden: tuple[Path, ...] = ()
    granted: MountGrant | None = field(default=None, repr=False)  # mounts outside the workdir (None: any)
    _scratch: str | None = field(default=None, repr=False)

    @property
    def spec(self) -> SandboxSpec:
        return self.choice.spec

    @property
    def isolated(self) -> bool:
        """False when commands run on the host as they are."""
        return self.choice.backend != "host"

    def _tmp(self) -> str | None:
        """The persisted /tmp of this run (``persist = true``), created on first use."""
        if not self.spec.persist:
            return None
        if self._scratch is None:
            import shutil
            import tempfile

            self._scratch = tempfile.mkdtemp(prefix="lev-sandbox-")
            weakref.finalize(self, shutil.rmtree, self._scratch, True)
        return self._scratch

    def close(self) -> None:
        """Remove what the sandbox kept between commands."""
        if self._scratch is not None:
            import shutil

            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _mounts(self) -> list[Mount]:
        return [parse_mount(entry, self.workdir) for entry in self.spec.mount]

    def _covered(self) -> list[tuple[str, bool]]:
        """Where, inside the sandbox, a hidden path would be visible, and whether it is a folder: in
        the working directory and the system folders (bound at their own paths) and under every
        mount whose source holds it (at the mount's target). Each is covered last, so no bind can
        uncover it."""
        workdir = self.workdir.resolve()
        same_path = [workdir, *(Path(p) for p in SYSTEM_READ_ONLY)]
        mounts = self._mounts()
        out: dict[str, bool] = {}
        for path in self.hidden:
            real = path.resolve()
            if not real.exists():
                continue
            folder = real.is_dir()
            # At its own path it is covered unless that would cover the working directory too.
            if not _inside(workdir, real) and any(_inside(real, root) for root in same_path):
                out[str(real)] = folder
            for mount in mounts:
                if _inside(real, mount.source):
                    out[str(mount.target / real.relative_to(mount.source))] = folder
        return list(out.items())

    def _checked_mounts(self) -> list[Mount]:
        """The mounts to bind; refuses (SandboxError) one that would show a hidden path or that the
        user did not grant. The launch check refuses such a run first, with advice; this keeps any
        other way in (a resumed run, a direct caller) from binding it."""
        granted = self.granted if self.granted is not None else (lambda m: True)
        problems = mount_problems(self.spec, self.workdir, self.hidden, granted)
        if problems:
            raise SandboxError("; ".join(problems))
        return self._mounts()

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` as it must be started to run inside the sandbox (unchanged on the host)."""
        backend = self.choice.backend
        if backend == "host":
            return list(argv)
        workdir = str(self.workdir.resolve())
        if backend == "bwrap":
            return [str(self.choice.program), *self._bwrap_args(workdir), "--", *argv]
        return [str(self.choice.program), *self._container_args(workdir), *argv]

    def _bwrap_args(self, workdir: str) -> list[str]:
        args = _isolation(self.spec.network)
        scratch = self._tmp()
        args += ["--bind", scratch, "/tmp"] if scratch else ["--tmpfs", "/tmp"]
        # Later binds lie over earlier ones. A mount that holds the working directory goes first,
        # so the workdir shows through it; one inside the workdir after it, so it shows at all; the
        # hidden paths are covered after both (those that hold the workdir only before it).
        inner, outer = self._split(self._checked_mounts(), Path(workdir))
        covers = self._covered()
        for m in outer:
            args += _bwrap_bind(m)
        for path, folder in covers:
            args += _bwrap_cover(path, folder)
        args += ["--bind", workdir, workdir]
        for m in inner:
            args += _bwrap_bind(m)
        for path, folder in covers:
            if not _inside(Path(workdir), Path(path)):
                args += _bwrap_cover(path, folder)
        args += ["--setenv", "HOME", "/tmp", "--chdir", workdir]
        return [*args, *SCRATCH_ENV]

    @staticmethod
    def _split(mounts: list[Mount], workdir: Path) -> tuple[list[Mount], list[Mount]]:
        """The mounts whose target lies inside the working directory, and the others."""
        inner = [m for m in mounts if _inside(m.target, workdir) and m.target != workdir]
        return inner, [m for m in mounts if m not in inner]

    def _container_args(self, workdir: str) -> list[str]:
        args = ["run", "--rm", "-i", "--workdir", workdir, "-v", f"{workdir}:{workdir}:rw"]
        if self.choice.backend == "docker":  # files it writes in the workdir stay the user's
            args += ["--user", f"{os.getuid()}:{os.getgid()}"]
        if not self.spec.network:
            args += ["--network", "none"]
        scratch = self._tmp()
        args += ["-v", f"{scratch}:/tmp:rw"] if scratch else ["--tmpfs", "/tmp"]
        for m in self._checked_mounts():
            args += ["-v", f"{m.source}:{m.target}:{'rw' if m.writable else 'ro'}"]
        for path, folder in self._covered():
            args += ["--tmpfs", path] if folder else ["-v", f"/dev/null:{path}:ro"]
        # Only what the image needs to find its programs: no host variable crosses over.
        args += ["-e", "HOME=/tmp", str(self.spec.image)]
        return args

    def environment(self) -> dict[str, str]:
        """The environment the wrapped command starts with: this process's, without credentials."""
        return child_environment()


class Sandboxes:
    """The sandboxes of one run, one per spec, made on first use (see :class:`Sandbox`)."""

    def __init__(self, workdir: str | os.PathLike[str], hidden: Iterable[str | os.PathLike[str] | None] = (),
                 granted: MountGrant | None = None, floor: SandboxSpec | None = None) -> None:
        self.workdir = workdir if isinstance(workdir, Path) else Path(workdir)
        self.hidden = unique(hidden)
        self.granted = granted
        self.floor = floor or SandboxSpec()  # the machine-wide [sandbox] (see :func:`under`)
        self._made: dict[SandboxSpec, Sandbox] = {}
        # The spec asked for last and its sandbox: every tool batch asks for its stage's, and
        # hashing a spec to look it up cost more than the rest of the answer.
        self._last: tuple[SandboxSpec, Sandbox] | None = None

    def get(self, spec: SandboxSpec) -> tuple[Sandbox, bool]:
        """The sandbox for ``spec`` under the machine-wide one, and whether it was made by this call
        (the first use)."""
        last = self._last
        if last is not None and last[0] is spec:
            return last[1], False
        asked = spec
        spec = under(spec, self.floor)
        made = self._made.get(spec)
        first = made is None
        if made is None:
            made = self._made[spec] = Sandbox(choose(spec), self.workdir, self.hidden, self.granted)
        self._last = (asked, made)
        return made, first

    def close(self) -> None:
        """Close every sandbox made (the run ended)."""
        for sandbox in self._made.values():
            sandbox.close()


def shell_argv(shell: str, command: str) -> list[str]:
    """The argv of one shell command line (``shell -c command``)."""
    return [shell, "-c", command]


def unique(paths: Iterable[str | os.PathLike[str] | None]) -> tuple[Path, ...]:
    """The distinct non-empty ``paths``, as Paths, in order."""
    seen: dict[str, Path] = {}
    for p in paths:
        if p:
            key = str(p)
            if key not in seen:  # a Path is kept as it is (Paths are immutable): building one costs
                seen[key] = p if isinstance(p, Path) else Path(p)
    return tuple(seen.values())
