"""``.leviath-bundle`` archives: ``lev pack`` and ``lev add`` (upstream ``packaging.md``).

The format is the upstream's, so a bundle made by either tool installs in the other: a gzip
tarball of the agent folder, paths relative to it (``agent.leviath`` at the top), with
credential-shaped files left out (:data:`EXCLUDED`). Packing is reproducible (sorted entries, fixed
owner and times) and never follows a symlink. Installing reads the archive entry by entry and
writes only regular files and folders under a staging folder (no absolute path, no ``..``, no link,
no device; at most :data:`MAX_UNPACKED_BYTES` in :data:`MAX_FILES` files), loads the manifest, then
swaps the staging folder into ``$LEV_HOME/agents/<name>`` in one rename, so a failed install leaves
the previous one as it was. The name is the manifest's ``[agent] name`` (the upstream takes the
bundle's file name, which carries the version: ``lev run my-agent`` would not find
``my-agent-0.1.0``).
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import os
import re
import shutil
import tarfile
import zlib
from pathlib import Path, PurePosixPath

from lev_nb.blueprint.constants import MANIFEST_NAME
from lev_nb.blueprint.errors import BlueprintError
from lev_nb.blueprint.loader import load_text
from lev_nb.blueprint.model import Blueprint
from lev_nb.errors import UsageError
from lev_nb.records import record
from lev_nb.settings.paths import lev_home

__all__ = ["BUNDLE_SUFFIX", "EXCLUDED", "BundleError", "Installed", "Packed", "install", "pack", "uninstall"]

BUNDLE_SUFFIX = ".leviath-bundle"
# Never shipped: version control, build output, and files that hold credentials (the upstream's list).
EXCLUDED = (
    ".git", ".DS_Store", "target", ".env*", "*.key", "*.pem", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", ".npmrc", ".pypirc", ".htpasswd",
    "credentials", "credentials.json", "service-account.json", "secrets.json", "secrets.yaml",
    "secrets.yml", ".aws", ".ssh", "config.toml", ".leviath", "*.leviath-bundle",
    # lev_nb's own: a run store kept beside an agent, and Python caches.
    ".lev", "__pycache__", ".ipynb_checkpoints",
)
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_FILES = 10_000
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class BundleError(UsageError):
    """A bundle that cannot be made or installed; nothing was written."""


@record
class Packed:
    """What ``lev pack`` wrote: the bundle, the agent, the files in it and those left out."""

    path: Path
    name: str
    version: str
    files: tuple[str, ...]
    skipped: tuple[str, ...]
    size: int


@record
class Installed:
    """What ``lev add`` installed: the agent's name, version, folder, and whether it replaced one."""

    name: str
    version: str
    path: Path
    replaced: bool
    blueprint: Blueprint


def excluded(name: str) -> bool:
    """Whether a file or folder called ``name`` is left out of a bundle."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in EXCLUDED)


def _agent_folder(path: Path) -> Path:
    folder = path.parent if path.name == MANIFEST_NAME else path
    if not (folder / MANIFEST_NAME).is_file():
        raise BundleError(f"{folder} holds no {MANIFEST_NAME}", hint="pass an agent folder or its agent.leviath")
    return folder


def pack(path: str | os.PathLike[str], output: str | os.PathLike[str] | None = None) -> Packed:
    """Bundle the agent folder ``path`` (or the folder of its agent.leviath) into ``output``
    (default ``{name}-{version}.leviath-bundle`` in the current folder). The manifest must load."""
    folder = _agent_folder(Path(path))
    blueprint = _load_manifest((folder / MANIFEST_NAME).read_bytes(), folder / MANIFEST_NAME)
    name, version = blueprint.agent.name, blueprint.agent.version
    target = Path(output) if output is not None else Path(f"{name}-{version}{BUNDLE_SUFFIX}")
    files, skipped = _walk(folder)
    buffer = io.BytesIO()
    # mtime=0 in the gzip header and in every entry: the same folder packs to the same bytes.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in files:
                data = (folder / rel).read_bytes()
                info = tarfile.TarInfo(rel)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    payload = buffer.getvalue()
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_bytes(payload)
    os.replace(temporary, target)
    return Packed(target, name, version, tuple(files), tuple(skipped), len(payload))


def _walk(folder: Path) -> tuple[list[str], list[str]]:
    """The files to bundle (POSIX paths relative to ``folder``, sorted) and what was left out."""
    files: list[str] = []
    skipped: list[str] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        base = Path(root)
        rel_root = base.relative_to(folder)
        for d in sorted(dirs):
            rel = (rel_root / d).as_posix()
            if excluded(d):
                skipped.append(rel + "/")
            elif (base / d).is_symlink():
                skipped.append(rel + "/ (a link: not followed)")
        dirs[:] = sorted(d for d in dirs if not excluded(d) and not (base / d).is_symlink())
        for n in sorted(names):
            rel = (rel_root / n).as_posix()
            path = base / n
            if excluded(n):
                skipped.append(rel)
            elif path.is_symlink():
                skipped.append(f"{rel} (a link: not followed)")
            elif not path.is_file():
                skipped.append(f"{rel} (not a regular file)")
            else:
                files.append(rel)
    return sorted(files), skipped


def _load_manifest(data: bytes, where: Path) -> Blueprint:
    try:
        return load_text(data.decode("utf-8"), path=where)
    except UnicodeDecodeError:
        raise BundleError(f"{where} is not UTF-8 text") from None
    except BlueprintError as exc:
        raise BundleError(f"the agent does not load: {exc}",
                          hint="`lev validate` on the folder says more") from None


def _members(data: bytes) -> list[tuple[str, bytes | None]]:
    """The archive's entries as ``(relative path, bytes or None for a folder)``, checked."""
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BundleError(f"not a {BUNDLE_SUFFIX} (a gzip-compressed tar archive): {exc}") from None
    entries: list[tuple[str, bytes | None]] = []
    total = 0
    with archive:
        try:
            for member in archive:
                name = _member_name(member.name)
                if name is None:
                    continue  # the archive's own "." entry
                if member.isdir():
                    entries.append((name, None))
                    continue
                if not member.isfile():
                    raise BundleError(f"the bundle holds '{member.name}', which is not a regular file or folder "
                                      "(links and devices are never installed)")
                total += member.size
                if total > MAX_UNPACKED_BYTES or len(entries) >= MAX_FILES:
                    raise BundleError(f"the bundle unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MiB or "
                                      f"{MAX_FILES} files")
                handle = archive.extractfile(member)
                entries.append((name, handle.read() if handle is not None else b""))
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise BundleError(f"the bundle is damaged: {exc}") from None
    return entries


def _member_name(raw: str) -> str | None:
    path = PurePosixPath(raw)
    if path.is_absolute() or "\\" in raw or any(part == ".." for part in path.parts):
        raise BundleError(f"the bundle holds '{raw}', a path outside the agent's folder")
    parts = [p for p in path.parts if p not in ("", ".")]
    return "/".join(parts) or None


def _root(entries: list[tuple[str, bytes | None]]) -> str:
    """The folder inside the archive that holds agent.leviath: the top (as packed), or one folder."""
    manifests = [name for name, data in entries if data is not None and PurePosixPath(name).name == MANIFEST_NAME]
    if MANIFEST_NAME in manifests:
        return ""
    tops = {name.split("/", 1)[0] for name, _ in entries}
    if len(tops) == 1 and f"{next(iter(tops))}/{MANIFEST_NAME}" in manifests:
        return next(iter(tops)) + "/"
    raise BundleError(f"the bundle has no {MANIFEST_NAME} at its top")


def install(package: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> Installed:
    """Install a ``.leviath-bundle`` file or an agent folder into ``$LEV_HOME/agents/<name>``,
    replacing an agent of that name. A folder is packed first (the same files a bundle would hold)."""
    source = Path(package)
    if source.is_dir() or source.name == MANIFEST_NAME:
        folder = _agent_folder(source)
        files, _ = _walk(folder)
        entries: list[tuple[str, bytes | None]] = [(rel, (folder / rel).read_bytes()) for rel in files]
    elif source.is_file():
        entries = _members(source.read_bytes())
    else:
        raise BundleError(f"'{package}' is neither an agent folder nor a {BUNDLE_SUFFIX} file",
                          hint="pass a path to one of those; lev add never downloads anything")
    root = _root(entries)
    manifest = next(data for name, data in entries if name == root + MANIFEST_NAME)
    assert manifest is not None
    blueprint = _load_manifest(manifest, source / MANIFEST_NAME if source.is_dir() else source)
    name = blueprint.agent.name
    if not _SAFE_NAME.match(name) or name in (".", ".."):
        raise BundleError(f"the agent's name '{name}' cannot name a folder (letters, digits, '.', '_' and '-' only)")
    agents = lev_home(home) / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    staging = agents / f".staging-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for rel, data in entries:
            if not rel.startswith(root) or rel == root.rstrip("/"):
                continue
            target = staging.joinpath(*rel[len(root):].split("/"))
            if data is None:
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        dest = agents / name
        replaced = dest.exists()
        old = agents / f".old-{name}-{os.getpid()}"
        if replaced:
            os.replace(dest, old)
        os.replace(staging, dest)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        raise BundleError(f"could not install into {agents}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Installed(name, blueprint.agent.version, dest, replaced, load_text(manifest.decode("utf-8"),
                                                                              path=dest / MANIFEST_NAME))


def uninstall(name: str, home: str | os.PathLike[str] | None = None) -> Path:
    """Remove the installed agent ``name`` from ``$LEV_HOME/agents``; returns the folder removed."""
    agents = lev_home(home) / "agents"
    folder = agents / name
    if not _SAFE_NAME.match(name) or name in (".", "..") or not (folder / MANIFEST_NAME).is_file():
        installed = sorted(p.name for p in agents.iterdir() if (p / MANIFEST_NAME).is_file()) if agents.is_dir() else []
        from lev_nb.blueprint.errors import did_you_mean

        guess = did_you_mean(name, installed)
        raise BundleError(f"no agent '{name}' is installed in {agents}",
                          hint=guess or ("installed: " + ", ".join(installed) if installed else "nothing is installed"))
    shutil.rmtree(folder)
    return folder
