"""Traces leave the process: ``lev run`` in a subprocess, configured by ``[observability]`` or by
the ``OTEL_*`` variables, exports over the SDK's OTLP/HTTP exporter to a collector stand-in on
127.0.0.1; ``exporter = "stdout"`` narrates spans on stderr; a configured tracer without its
packages is one clear error; batch worker processes send their runs' spans before they return."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector import Collector, serve_collector
from support import BLUEPRINTS, ROOT

AGENT = """\
[agent]
name = "traced"
[tool_permissions]
list_dir = "allow"
[stages.look]
available_tools = ["list_dir"]
[stages.report]
available_tools = ["list_dir"]
[stages.report.transitions]
"""
TURNS = [
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"text": "looked"},
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"text": "the report"},
]
WAIT_S = 120


@pytest.fixture
def collector() -> Iterator[Collector]:
    with serve_collector() as running:
        yield running


def setup(tmp_path: Path, config: str = "") -> tuple[Path, Path, Path]:
    """An agent folder, a scripted model file and a home with ``config`` as its config.toml."""
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text(AGENT, encoding="utf-8")
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(TURNS), encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config, encoding="utf-8")
    return agent, script, home


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """This environment without any OTEL_ variable, LEV_HOME at ``home``, plus ``extra``. The batch
    processor waits a minute between exports, so only the flush at the process's end can send."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(LEV_HOME=str(home), OTEL_BSP_SCHEDULE_DELAY="60000", **extra)
    return env


def lev_run(tmp_path: Path, agent: Path, script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lev_nb.cli", "run", str(agent), "--task", "look around",
         "--model", f"scripted:{script}", "--workdir", str(tmp_path / "work"), "--quiet"],
        env=env, text=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=WAIT_S,
    )


def run_id_of(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_lev_run_exports_its_trace_over_otlp_http_as_configured(tmp_path: Path, collector: Collector) -> None:
    agent, script, home = setup(tmp_path, f"""
[observability]
enabled = true
exporter = "otlp"
endpoint = "{collector.url}"
service_name = "lev-under-test"
""")
    run_id = run_id_of(lev_run(tmp_path, agent, script, clean_env(home)))

    assert set(collector.paths) == {"/v1/traces"}
    assert set(collector.content_types) == {"application/x-protobuf"}
    assert {s.service for s in collector.spans} == {"lev-under-test"}
    (root,) = collector.named("agent.run")
    assert root.attributes["lev.run_id"] == run_id
    assert root.attributes["lev.status"] == "complete"
    assert root.parent_span_id == b""
    stages = collector.named("agent.stage")
    assert [s.attributes["lev.stage"] for s in sorted(stages, key=lambda s: s.start_ns)] == ["look", "report"]
    assert all(s.parent_span_id == root.span_id for s in stages)
    look = next(s for s in stages if s.attributes["lev.stage"] == "look")
    tools = sorted(collector.named("agent.tool_call"), key=lambda s: s.start_ns)
    assert [t.attributes["gen_ai.tool.name"] for t in tools] == ["list_dir", "list_dir"]
    assert tools[0].parent_span_id == look.span_id
    inferences = collector.named("agent.inference")
    assert len(inferences) == 4
    assert {s.attributes["gen_ai.provider.name"] for s in inferences} == {"scripted"}
    assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in inferences)
    assert all("lev.cost_usd" in s.attributes for s in inferences)
    # The spans' times are the run's own: they agree with the record's events.
    events = [json.loads(line) for line in (home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["type"] == "run_started")
    assert root.start_ns == int(started["ts"] * 1_000_000_000)


def test_otel_environment_variables_alone_turn_tracing_on(tmp_path: Path, collector: Collector) -> None:
    agent, script, home = setup(tmp_path)
    env = clean_env(home, OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                    OTEL_SERVICE_NAME="from-the-environment")
    run_id = run_id_of(lev_run(tmp_path, agent, script, env))
    (root,) = collector.named("agent.run")
    assert root.attributes["lev.run_id"] == run_id
    assert {s.service for s in collector.spans} == {"from-the-environment"}


def test_a_value_in_the_file_beats_the_environment(tmp_path: Path, collector: Collector) -> None:
    agent, script, home = setup(tmp_path, f'[observability]\nendpoint = "{collector.url}"\nservice_name = "from-file"\n')
    env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_SERVICE_NAME="from-env")
    run_id_of(lev_run(tmp_path, agent, script, env))
    assert {s.service for s in collector.spans} == {"from-file"}
    assert len(collector.named("agent.run")) == 1


def test_the_signal_specific_endpoint_variable_is_used_as_it_is(tmp_path: Path, collector: Collector) -> None:
    agent, script, home = setup(tmp_path, "[observability]\nenabled = true\n")
    env = clean_env(home, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector.url + "/v1/traces",
                    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    run_id_of(lev_run(tmp_path, agent, script, env))
    assert len(collector.named("agent.run")) == 1
    assert {s.service for s in collector.spans} == {"lev_nb"}


def test_a_collector_that_is_down_changes_nothing_about_the_run(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent, script, home = setup(tmp_path, f'[observability]\nendpoint = "http://127.0.0.1:{port}"\n')
    result = lev_run(tmp_path, agent, script, clean_env(home))
    run_id = run_id_of(result)
    meta = json.loads((home / "runs" / run_id / "meta.json").read_text())
    assert meta["status"] == "complete"
    assert "Traceback" not in result.stderr
    assert "export" in result.stderr  # the SDK says the spans could not be sent


def test_the_stdout_exporter_narrates_spans_on_stderr(tmp_path: Path) -> None:
    agent, script, home = setup(tmp_path, '[observability]\nenabled = true\nexporter = "stdout"\n')
    result = lev_run(tmp_path, agent, script, clean_env(home))
    run_id = run_id_of(result)
    assert result.stdout.strip() == run_id  # stdout keeps only the run id
    lines = [line for line in result.stderr.splitlines() if line.startswith("span ")]
    names = [line.split()[1] for line in lines]
    assert names.count("agent.run") == 1 and names.count("agent.stage") == 2
    assert names.count("agent.inference") == 4 and names.count("agent.tool_call") == 2
    assert f"lev.run_id={run_id}" in next(line for line in lines if line.split()[1] == "agent.run")


# Imports of opentelemetry fail in this interpreter: as on a machine without the lev_nb[otel] extra.
WITHOUT_OTEL = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Block())
from lev_nb.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_tracing_configured_without_the_extra_is_one_clear_error(tmp_path: Path) -> None:
    agent, script, home = setup(tmp_path, '[observability]\nendpoint = "http://127.0.0.1:4318"\n')
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL, "run", str(agent), "--task", "t", "--model", f"scripted:{script}",
         "--workdir", str(tmp_path / "work")],
        env=clean_env(home), text=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=WAIT_S,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "config.toml:2" in lines[0] and "lev_nb[otel]" in lines[0] and "not installed" in lines[0]
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())  # no run was started


OFF = """
import sys, lev_nb
run = lev_nb.run(sys.argv[1], task="t", model="mock", workdir=sys.argv[2])
run.wait(100)
print(run.status, sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""


def test_without_configuration_tracing_is_off_and_opentelemetry_is_never_imported(tmp_path: Path) -> None:
    agent, _, home = setup(tmp_path)
    result = subprocess.run([sys.executable, "-c", OFF, str(agent), str(tmp_path / "work")], env=clean_env(home),
                            text=True, capture_output=True, timeout=WAIT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["complete", "[]"]


def test_batch_worker_processes_send_their_runs_spans(home: Path, collector: Collector,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import lev_nb

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # only the share's own flush can send
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[observability]\nendpoint = "{collector.url}"\n', encoding="utf-8")
    tasks = ["R-1: the app crashes", "R-2: the export is slow", "R-3: a typo"]
    out = lev_nb.run_many(BLUEPRINTS / "triage", tasks, model="mock", processes=2)
    assert [s.status for s in out] == ["complete"] * 3
    runs = {s.attributes["lev.run_id"] for s in collector.named("agent.run")}
    assert runs == {s.run_id for s in out}


def test_dask_workers_send_their_runs_spans_before_the_batch_returns(home: Path, collector: Collector,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A Dask worker lives on after its share, so only the share's own flush sends its spans."""
    distributed = pytest.importorskip("distributed")
    import lev_nb

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[observability]\nendpoint = "{collector.url}"\n', encoding="utf-8")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            out = lev_nb.run_many(BLUEPRINTS / "triage", ["R-1: a crash", "R-2: slow"], model="mock", client=client)
            assert [s.status for s in out] == ["complete"] * 2
            runs = {s.attributes["lev.run_id"] for s in collector.named("agent.run")}
            assert runs == {s.run_id for s in out}
