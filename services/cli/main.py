"""The ``hindsight`` command line (typer): ``up``, ``demo``, ``mcp-stdio``, ``schemas export``,
``dlq list|show|replay``, ``audit``, ``chaos``, ``bench load``."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hindsight.errors import ConfigurationError, HindsightError
from hindsight.observability import configure_logging
from hindsight.settings import AllSettings, exit_on_config_error

if TYPE_CHECKING:
    from services.gateway.settings import GatewaySettings

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Hindsight: streaming long-term memory for LLM agents."
)
schemas_app = typer.Typer(no_args_is_help=True, help="Wire schema tools.")
app.add_typer(schemas_app, name="schemas")
dlq_app = typer.Typer(
    no_args_is_help=True, help="Dead letters (memory.dlq.v1): list, show, replay after a fix."
)
app.add_typer(dlq_app, name="dlq")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (scripts that print JSON, not timed tests).")
app.add_typer(bench_app, name="bench")
tune_app = typer.Typer(
    help="Fit the similarity floor, decay, expiry and keep thresholds from ClickHouse (DESIGN.md s10)."
)
app.add_typer(tune_app, name="tune")

DEFAULT_DATA = Path("../shared/data/locomo_dev.json")
log = logging.getLogger("hindsight.cli")


def _settings(data_dir: Path | None, bootstrap: str | None, *, quiet: bool = False) -> AllSettings:
    """Settings from the environment with the CLI's overrides; logging configured. ``quiet``: log
    warnings and errors only, unless ``HINDSIGHT_LOG_LEVEL`` is set (a command whose output is its
    report, such as the demo)."""
    cfg = AllSettings()
    if data_dir is not None:
        cfg.runtime.data_dir = data_dir
    if bootstrap:
        cfg.kafka.bootstrap = bootstrap
    if quiet and "log_level" not in cfg.runtime.model_fields_set:
        cfg.runtime.log_level = "WARNING"
    configure_logging(cfg.runtime)
    return cfg


def _check_stage_settings() -> None:
    """Build every stage's settings once, before a broker or model starts, so that a bad
    ``HINDSIGHT_GUARD_*`` / ``_INGEST_*`` / ``_REFLECT_*`` / ``_EVICT_*`` value fails the command at
    once (seconds before the stage would build them itself, after the broker and the models).

    Raises:
        pydantic.ValidationError: a value is invalid (``exit_on_config_error`` names the variable).
    """
    from services.evict.settings import EvictSettings  # noqa: PLC0415
    from services.guard.settings import GuardSettings  # noqa: PLC0415
    from services.ingest.settings import IngestSettings  # noqa: PLC0415
    from services.reflect.settings import ReflectSettings  # noqa: PLC0415

    for settings in (GuardSettings, IngestSettings, ReflectSettings, EvictSettings):
        settings()


def _fail(exc: BaseException) -> typer.Exit:
    kind = "configuration error" if isinstance(exc, ConfigurationError) else "error"
    typer.secho(f"hindsight: {kind}: {exc}", fg=typer.colors.RED, err=True)
    return typer.Exit(2)


def _port_free(host: str, port: int) -> bool:
    """Whether a TCP server could bind ``host:port`` now (as uvicorn binds: with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _key_hint(gateway: GatewaySettings) -> str:
    """Where a newcomer finds the API key: the local default is public (README), a configured key is
    never printed."""
    from services.gateway.settings import DEV_KEY  # noqa: PLC0415

    keys = gateway.api_keys or {}
    if DEV_KEY in keys:
        return (
            f"hindsight up: API key {DEV_KEY} (the local default; HINDSIGHT_GATEWAY_API_KEYS sets your own), "
            f"sent as 'Authorization: Bearer {DEV_KEY}'"
        )
    return f"hindsight up: API keys from HINDSIGHT_GATEWAY_API_KEYS ({len(keys)} configured)"


@app.command()
def up(
    *,
    data_dir: Annotated[Path | None, typer.Option(help="Where local stores keep their files.")] = None,
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this Kafka instead of the embedded broker.")
    ] = None,
    port: Annotated[int, typer.Option(help="Gateway port (0 = any free port).")] = 8080,
) -> None:
    """Run every consumer and the gateway in one process until Ctrl-C / SIGTERM."""
    from hindsight.brokers.embedded import EmbeddedBroker  # noqa: PLC0415
    from services.cli import discovery  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    cfg = _settings(data_dir, bootstrap)
    gateway = GatewaySettings(port=port)
    _check_stage_settings()
    if port and not _port_free(gateway.host, port):  # fail before starting every consumer
        raise _fail(
            OSError(f"port {port} on {gateway.host} is in use: pass --port N (or --port 0 for any free port)")
        )
    try:
        # Lock the data directory and boot the broker first: the JVM starts while Python imports
        # the services and loads the model.
        with EmbeddedBroker(cfg) as broker:
            from services.cli.embedded import embedded_stack  # noqa: PLC0415

            async def main() -> None:
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                async with embedded_stack(cfg, gateway, broker=broker) as stack:
                    running = discovery.Running(stack.gateway_url, stack.bootstrap, os.getpid())
                    discovery.record(cfg.runtime.data_dir, running)  # for mcp-stdio and dlq
                    typer.echo(
                        f"hindsight up: gateway {stack.gateway_url} (MCP at {stack.gateway_url}/mcp), "
                        f"Kafka {stack.bootstrap}, data in {cfg.runtime.data_dir}"
                    )
                    typer.echo(_key_hint(gateway))
                    try:
                        await stop.wait()
                    finally:
                        discovery.forget(cfg.runtime.data_dir, os.getpid())

            asyncio.run(main())
        typer.echo("hindsight up: stopped")
    except HindsightError as exc:
        raise _fail(exc) from exc


@app.command()
def demo(
    *,
    conversations: Annotated[
        str | None, typer.Option(help="Comma-separated sample ids, e.g. conv-26,conv-30.")
    ] = None,
    all_conversations: Annotated[bool, typer.Option("--all", help="Every conversation in the file.")] = False,
    data: Annotated[Path, typer.Option(help="LoCoMo-format JSON file.")] = DEFAULT_DATA,
    jsonl: Annotated[
        Path | None, typer.Option(help="Your own transcript: one interaction event per line.")
    ] = None,
    top_k: Annotated[
        int, typer.Option(min=10, max=15, help="Memories per recall (10..15: recall@10 needs at least 10).")
    ] = 10,
    data_dir: Annotated[Path | None, typer.Option(help="Where local stores keep their files.")] = None,
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this Kafka instead of the embedded broker.")
    ] = None,
    timeout_s: Annotated[
        float, typer.Option(help="Max seconds to wait for the pipeline to catch up.")
    ] = 1800.0,
    wait_reconcile: Annotated[
        bool,
        typer.Option(
            help="Ask only once reconcile (behind ingest) has caught up; reports its catch-up time."
        ),
    ] = False,
) -> None:
    """Publish real conversations as Kafka events, wait for lag 0, recall through the gateway, print JSON.

    Default: conversation conv-26 of ../shared/data/locomo_dev.json on the embedded default.
    """
    import tempfile  # noqa: PLC0415

    from hindsight.eval import locomo  # noqa: PLC0415

    # the input is checked before the stack's modules are imported: a wrong id or path fails at once
    try:
        if jsonl is not None:
            from services.cli.demo import read_jsonl  # noqa: PLC0415

            events = read_jsonl(jsonl)
            questions: list[locomo.Question] = []
            n_conv = len({(e.tenant_id, e.user_id) for e in events})
            tenants = sorted({e.tenant_id for e in events})
        else:
            if all_conversations and conversations:
                raise locomo.DatasetError("pass either --all or --conversations, not both")
            samples = locomo.load(data)
            ids = (
                None
                if all_conversations
                else [c.strip() for c in (conversations or "conv-26").split(",") if c.strip()]
            )
            convs = [locomo.conversation(s) for s in locomo.select(samples, ids)]
            events = [e for c in convs for e in c.events]
            questions = [q for c in convs for q in c.questions]
            n_conv = len(convs)
            tenants = [locomo.TENANT]
    except locomo.DatasetError as exc:
        raise _fail(exc) from exc

    from services.cli.demo import run_demo  # noqa: PLC0415
    from services.cli.embedded import embedded_stack  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    _check_stage_settings()
    scratch = (
        None
        if data_dir
        else tempfile.TemporaryDirectory(prefix="hindsight-demo-", ignore_cleanup_errors=True)
    )
    workdir = data_dir or Path(scratch.name if scratch else ".")
    cfg = _settings(workdir, bootstrap, quiet=True)  # HINDSIGHT_LOG_LEVEL=INFO shows the stages' logs
    api_key = "dev-demo-key"
    gateway = GatewaySettings(port=0, api_keys={api_key: tenants[0]} if tenants else {})
    typer.echo(
        f"demo: {n_conv} conversation(s), {len(events)} events, {len(questions)} questions; "
        f"data in {workdir}" + (" (removed at exit; --data-dir keeps it)" if scratch else ""),
        err=True,
    )

    async def main() -> str:
        async with embedded_stack(cfg, gateway) as stack:
            result = await run_demo(
                stack,
                api_key,
                events,
                questions,
                conversations=n_conv,
                top_k=top_k,
                timeout_s=timeout_s,
                wait_reconcile=wait_reconcile,
            )
            typer.echo(f"per category recall@10: {json.dumps(result.by_category)}", err=True)
            return result.line()

    try:
        line = asyncio.run(main())
    except (HindsightError, TimeoutError) as exc:
        raise _fail(exc) from exc
    finally:
        if scratch is not None:
            scratch.cleanup()
    typer.echo(line)


@app.command("mcp-stdio")
def mcp_stdio() -> None:
    """Serve the MCP tools over stdio as the principal of HINDSIGHT_API_KEY.

    With a Hindsight running (HINDSIGHT_GATEWAY_URL, or the `hindsight up` of HINDSIGHT_DATA_DIR)
    every call is forwarded to its gateway; otherwise the tools run in this process (needs
    HINDSIGHT_KAFKA_BOOTSTRAP; it then holds the data directory itself).
    """
    from hindsight.stores.dirlock import data_dir_lock  # noqa: PLC0415
    from services.cli import discovery  # noqa: PLC0415
    from services.gateway.mcp_proxy import API_KEY_ENV, GATEWAY_URL_ENV, run_stdio_proxy  # noqa: PLC0415

    cfg = AllSettings()
    configure_logging(cfg.runtime)  # logs go to stderr; stdout carries the protocol
    running = discovery.find(cfg.runtime.data_dir)
    url = os.environ.get(GATEWAY_URL_ENV) or (running.gateway_url if running is not None else "")
    try:
        if url:
            asyncio.run(run_stdio_proxy(url, os.environ.get(API_KEY_ENV)))
        elif not cfg.kafka.bootstrap:
            raise ConfigurationError(
                f"no running Hindsight on data directory {cfg.runtime.data_dir}: start 'hindsight up "
                f"--data-dir {cfg.runtime.data_dir}' (mcp-stdio then forwards to its gateway), or set "
                f"{GATEWAY_URL_ENV}; to serve the tools in this process instead, set "
                "HINDSIGHT_KAFKA_BOOTSTRAP and HINDSIGHT_GATEWAY_API_KEYS"
            )
        else:
            from services.gateway.app import run_stdio  # noqa: PLC0415

            # In this process: it holds the data directory's embedded stores itself (refused while
            # another process does: then start that one's gateway, or point HINDSIGHT_GATEWAY_URL).
            local = not (cfg.qdrant.url and cfg.clickhouse.dsn and cfg.redis.url)
            with data_dir_lock(cfg.runtime.data_dir) if local else nullcontext():
                asyncio.run(run_stdio())
    except HindsightError as exc:
        raise _fail(exc) from exc


@schemas_app.command("export")
def export_schemas(out: Annotated[Path, typer.Option(help="Output folder.")] = Path("docs/schemas")) -> None:
    """Write the JSON Schema of every public event to ``out/<Model>.v1.json``."""
    from schemas.v1 import PUBLIC_EVENTS  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    for model in PUBLIC_EVENTS:
        path = out / f"{model.__name__}.v1.json"
        path.write_text(
            json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        typer.echo(str(path))


def _kafka(bootstrap: str | None, data_dir: Path | None = None) -> str:
    """``--bootstrap``, else ``HINDSIGHT_KAFKA_BOOTSTRAP``, else the broker of the ``hindsight up``
    running on the data directory (``--data-dir``, else ``HINDSIGHT_DATA_DIR``)."""
    from services.cli import discovery  # noqa: PLC0415

    cfg = _settings(data_dir, None)
    running = discovery.find(cfg.runtime.data_dir)
    value = bootstrap or cfg.kafka.bootstrap or (running.bootstrap if running is not None else "")
    if not value:
        raise _fail(
            ConfigurationError(
                "name the Kafka: --bootstrap host:port or HINDSIGHT_KAFKA_BOOTSTRAP (or run this beside "
                f"the 'hindsight up' of --data-dir / HINDSIGHT_DATA_DIR {cfg.runtime.data_dir})"
            )
        )
    return value


BootstrapOpt = Annotated[
    str | None,
    typer.Option(
        help="Kafka host:port (default HINDSIGHT_KAFKA_BOOTSTRAP, else the running 'hindsight up')."
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(help="The data directory of the running 'hindsight up' (default HINDSIGHT_DATA_DIR)."),
]


@app.command()
def audit(
    *,
    data_dir: Annotated[
        Path | None, typer.Option(help="The data directory of a stopped embedded instance.")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (default: every tenant).")] = None,
    window_days: Annotated[float, typer.Option(help="Recent window compared with what came before.")] = 7.0,
    confidence_jump: Annotated[float, typer.Option(help="Confidence rise that is a jump.")] = 0.3,
    conflict_rate: Annotated[float, typer.Option(help="Share of an agent's writes that conflict.")] = 0.2,
    quarantine_rate: Annotated[float, typer.Option(help="Share of a source's events quarantined.")] = 0.2,
    spike_ratio: Annotated[float, typer.Option(help="Window/before daily ratio of a reason.")] = 3.0,
    min_events: Annotated[int, typer.Option(help="Fewest events behind a rate.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON document.")] = False,
) -> None:
    """Anomalies in the stores: confidence jumps, unknown or new sources, conflict and quarantine rates."""
    from rich.console import Console  # noqa: PLC0415

    from hindsight.audit import AuditSettings  # noqa: PLC0415
    from services.cli.audit import render, run  # noqa: PLC0415

    cfg = AuditSettings(window_days, confidence_jump, conflict_rate, quarantine_rate, spike_ratio, min_events)
    try:
        report = run(_settings(data_dir, None), tenant_id=tenant, cfg=cfg)
    except HindsightError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        render(report, Console(width=160))


@dlq_app.command("list")
def dlq_list(
    *,
    stage: Annotated[str | None, typer.Option(help="Only this stage.")] = None,
    bootstrap: BootstrapOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """One JSON line per distinct dead letter (id, stage, error, source, copies, reason), oldest first;
    "no dead letters" on stderr when there is none."""
    from services.cli import dlq  # noqa: PLC0415

    try:
        entries = asyncio.run(dlq.load(_kafka(bootstrap, data_dir), stage=stage))
        for entry in entries:
            typer.echo(json.dumps(entry.summary(), ensure_ascii=False))
        if not entries:
            typer.echo("no dead letters" + (f" of stage {stage}" if stage else ""), err=True)
    except HindsightError as exc:
        raise _fail(exc) from exc


@dlq_app.command("show")
def dlq_show(
    dead_letter_id: Annotated[str, typer.Argument(help="<partition>:<offset>")],
    bootstrap: BootstrapOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """The whole dead letter, original record decoded, as indented JSON."""
    from services.cli import dlq  # noqa: PLC0415

    try:
        (entry,) = dlq.find(asyncio.run(dlq.load(_kafka(bootstrap, data_dir))), [dead_letter_id])
    except HindsightError as exc:
        raise _fail(exc) from exc
    typer.echo(json.dumps(entry.detail(), indent=2, ensure_ascii=False))


@dlq_app.command("replay")
def dlq_replay(
    ids: Annotated[list[str] | None, typer.Argument(help="Dead letter ids (<partition>:<offset>).")] = None,
    *,
    all_letters: Annotated[bool, typer.Option("--all", help="Every dead letter (of --stage).")] = False,
    stage: Annotated[str | None, typer.Option(help="With --all: only this stage.")] = None,
    fixed: Annotated[Path | None, typer.Option(help="Replay this file's bytes instead (one id).")] = None,
    bootstrap: BootstrapOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Republish dead letters to their source topics (original key; safe to repeat)."""
    from services.cli import dlq  # noqa: PLC0415

    try:
        if not ids and not all_letters:
            raise ConfigurationError("name dead letter ids (see `hindsight dlq list`) or pass --all")
        kafka = _kafka(bootstrap, data_dir)
        entries = asyncio.run(dlq.load(kafka, stage=stage))
        chosen = entries if all_letters else dlq.find(entries, ids or [])
        fix = fixed.read_bytes() if fixed is not None else None
        for line in asyncio.run(
            dlq.replay(kafka, chosen, fixed=fix, idempotent=_settings(None, None).kafka.idempotent)
        ):
            typer.echo(json.dumps(line))
    except HindsightError as exc:
        raise _fail(exc) from exc


@app.command()
def chaos(
    *,
    events: Annotated[int, typer.Option(help="Valid interaction events to publish.")] = 5000,
    kills: Annotated[int | None, typer.Option(help="SIGKILLs (default scales with --events).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed (workload and fault points).")] = 7,
    bootstrap: Annotated[str | None, typer.Option(help="Existing Kafka (default: start one).")] = None,
    workdir: Annotated[Path | None, typer.Option(help="Keep files here (default: a temp dir).")] = None,
    timeout_s: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 1800.0,
    qdrant_server: Annotated[
        bool,
        typer.Option(help="Embed processes share a real Qdrant server, which is also killed and restarted."),
    ] = False,
    embeds: Annotated[
        int | None, typer.Option(help="Embed processes (default 1; 2 with --qdrant-server).")
    ] = None,
    updates: Annotated[
        int, typer.Option(help="Users who revise a statement: their version chains are checked (0: none).")
    ] = 6,
) -> None:
    """Kill, restart and starve the pipeline while it ingests; print one JSON line; exit 1 on loss."""
    from bench.chaos import main_chaos  # noqa: PLC0415

    code = main_chaos(
        events=events,
        kills=kills,
        seed=seed,
        bootstrap=bootstrap,
        workdir=workdir,
        timeout_s=timeout_s,
        qdrant_server=qdrant_server,
        embeds=embeds,
        updates=updates,
    )
    raise typer.Exit(code)


@bench_app.command("load")
def bench_load(
    *,
    rate: Annotated[list[float], typer.Option(help="Offered events/s (repeat to try several).")] = [16.0],  # noqa: B006
    seconds: Annotated[float, typer.Option(help="Seconds of steady load per rate.")] = 60.0,
    plot: Annotated[Path, typer.Option(help="PNG of lag over time.")] = Path("docs/load-lag.png"),
    workdir: Annotated[Path | None, typer.Option(help="Keep files here (default: a temp dir).")] = None,
) -> None:
    """Offer steady load to the embedded default; print throughput, lag and memory per rate as JSON."""
    from bench.load import main_load  # noqa: PLC0415

    raise typer.Exit(main_load(rates=rate, seconds=seconds, plot=plot, workdir=workdir))


def main() -> None:
    """Console-script entry point: a configuration error is one line naming the setting (exit 2)."""
    with exit_on_config_error():
        app(prog_name="hindsight")


_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


@bench_app.command("recall", context_settings=_PASS_THROUGH)
def bench_recall(ctx: typer.Context) -> None:
    """Evidence recall of Hindsight vs dense, BM25 and hybrid baselines on LoCoMo (--help for options)."""
    from bench.recall import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("tune", context_settings=_PASS_THROUGH)
def bench_tune(ctx: typer.Context) -> None:
    """Tuner vs known answers: synthetic population and LoCoMo replay, default vs tuned (--help)."""
    from bench.tune import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("console", context_settings=_PASS_THROUGH)
def bench_console(ctx: typer.Context) -> None:
    """Console page render times for a user with 10,000 memories (--help for options)."""
    from bench.console import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("scale", context_settings=_PASS_THROUGH)
def bench_scale(ctx: typer.Context) -> None:
    """Recall latency at 10k/100k memories and ingest-to-searchable latency (--help for options)."""
    from bench.scale import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("guard", context_settings=_PASS_THROUGH)
def bench_guard(ctx: typer.Context) -> None:
    """Guard on the labelled bilingual set: span recall, secrets leaked, quarantine rates (--help)."""
    from bench.guard import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("updates", context_settings=_PASS_THROUGH)
def bench_updates(ctx: typer.Context) -> None:
    """Version chains, conflicts and lessons on 122 bilingual update scenarios (--help for options)."""
    from bench.updates import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("inference", context_settings=_PASS_THROUGH)
def bench_inference(ctx: typer.Context) -> None:
    """Embedder and reranker throughput: Triton (HTTP, gRPC) vs in-process (--help for options)."""
    from bench.inference import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("broker", context_settings=_PASS_THROUGH)
def bench_broker(ctx: typer.Context) -> None:
    """Embedded broker candidates (Kafka, Tansu): start-up, throughput, latency, idle CPU (--help)."""
    from bench.broker import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@tune_app.callback(invoke_without_command=True)
def tune(
    ctx: typer.Context,
    *,
    data_dir: Annotated[Path | None, typer.Option(help="Local stores (embedded chDB, tuned file).")] = None,
    dsn: Annotated[
        str | None, typer.Option(help="ClickHouse DSN (default HINDSIGHT_CLICKHOUSE_DSN).")
    ] = None,
    database: Annotated[str | None, typer.Option(help="Database of the analytics tables.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Fit on one tenant only.")] = None,
    signal: Annotated[
        str, typer.Option(help="What counts as a use: 'feedback' (labelled used) or 'access' (returned).")
    ] = "feedback",
    clock: Annotated[
        str, typer.Option(help="'wall' (recalled_at) or 'reference' (reference_time: replayed histories).")
    ] = "wall",
    target_recall: Annotated[float, typer.Option(help="Share of used memories the floor keeps.")] = 0.95,
    max_regret: Annotated[float, typer.Option(help="Share of later-used memories expiry may expire.")] = 0.0,
    keep_recall: Annotated[
        float, typer.Option(help="Share of used memories the keep threshold keeps.")
    ] = 0.99,
    holdout: Annotated[
        float, typer.Option(help="Share of the labelled history (the latest) held out to validate fits.")
    ] = 0.3,
    target_expire_share: Annotated[
        float,
        typer.Option(help="If > 0: the safest expiry threshold expiring this share of never-used memories."),
    ] = 0.0,
    plots: Annotated[Path | None, typer.Option(help="Folder for the PNG plots.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Fit and plot, but write no settings file.")] = False,
) -> None:
    """Fit from ClickHouse; print a table (stderr) and JSON (stdout); write plots and tuned settings."""
    if ctx.invoked_subcommand is not None:
        return
    from services.cli.tune import main_tune  # noqa: PLC0415

    if signal not in ("feedback", "access") or clock not in ("wall", "reference"):
        raise _fail(ValueError("--signal is 'feedback' or 'access'; --clock is 'wall' or 'reference'"))
    raise typer.Exit(
        main_tune(
            data_dir=data_dir,
            dsn=dsn,
            database=database,
            tenant=tenant,
            signal=signal,  # type: ignore[arg-type]
            clock=clock,  # type: ignore[arg-type]
            target_recall=target_recall,
            max_regret=max_regret,
            keep_recall=keep_recall,
            holdout=holdout,
            target_expire_share=target_expire_share,
            plots=plots,
            dry_run=dry_run,
        )
    )


@tune_app.command("rollback")
def tune_rollback(
    data_dir: Annotated[Path | None, typer.Option(help="Where the tuned file lives.")] = None,
) -> None:
    """Write a new tuned-settings version with the previous version's values."""
    from hindsight.tuning import settings_file  # noqa: PLC0415

    cfg = _settings(data_dir, None)
    path = settings_file.TuningSettings().path(cfg.runtime.data_dir)
    try:
        doc = settings_file.rollback(path)
    except HindsightError as exc:
        raise _fail(exc) from exc
    typer.echo(json.dumps(doc.model_dump(mode="json")))


@tune_app.command("show")
def tune_show(
    data_dir: Annotated[Path | None, typer.Option(help="Where the tuned file lives.")] = None,
) -> None:
    """Print the current tuned-settings version (JSON)."""
    from hindsight.tuning import settings_file  # noqa: PLC0415

    cfg = _settings(data_dir, None)
    path = settings_file.TuningSettings().path(cfg.runtime.data_dir)
    try:
        doc = settings_file.load(path)
    except HindsightError as exc:
        raise _fail(exc) from exc
    if doc is None:
        raise _fail(ConfigurationError(f"no tuned settings at {path}: run `hindsight tune` first"))
    typer.echo(json.dumps(doc.model_dump(mode="json")))


@tune_app.command("sql")
def tune_sql(
    out: Annotated[Path, typer.Option(help="Where to write the script.")] = Path(
        "infra/clickhouse/schema.sql"
    ),
    database: Annotated[str, typer.Option(help="Database name in the script.")] = "hindsight",
) -> None:
    """Write every ClickHouse migration and view as one SQL script (infra/clickhouse/schema.sql)."""
    from hindsight.analytics.queries import views  # noqa: PLC0415
    from hindsight.analytics.schema import SchemaNames, render_all  # noqa: PLC0415

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_all(SchemaNames(database), views), encoding="utf-8")
    typer.echo(str(out))


@bench_app.command("judge", context_settings=_PASS_THROUGH)
def bench_judge(ctx: typer.Context) -> None:
    """Revision judge and fact extraction on the labelled bilingual sets: per-class precision/recall,
    false supersede on look-alikes, ms per pair (--help for options)."""
    from bench.judge import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("idle", context_settings=_PASS_THROUGH)
def bench_idle(ctx: typer.Context) -> None:
    """CPU of an idle `hindsight up` (process tree, share of one core) over a window (--help)."""
    from bench.idle import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("serve", context_settings=_PASS_THROUGH)
def bench_serve(ctx: typer.Context) -> None:
    """Recall latency through HTTP and MCP vs in-process, 1/4/16 callers, ingest idle/running (--help)."""
    from bench.serve import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))


@bench_app.command("ingest", context_settings=_PASS_THROUGH)
def bench_ingest(ctx: typer.Context) -> None:
    """Ingest throughput vs the embedder's standalone rate, searchable latency at 80% (--help)."""
    from bench.ingest import main as run  # noqa: PLC0415

    raise typer.Exit(run(ctx.args))
