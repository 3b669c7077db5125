"""The ``hindsight`` command line (typer): ``up``, ``demo``, ``mcp-stdio``, ``schemas export``."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from hindsight.errors import HindsightError
from hindsight.observability import configure_logging
from hindsight.settings import AllSettings

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Hindsight: streaming long-term memory for LLM agents."
)
schemas_app = typer.Typer(no_args_is_help=True, help="Wire schema tools.")
app.add_typer(schemas_app, name="schemas")

DEFAULT_DATA = Path("../shared/data/locomo_dev.json")
log = logging.getLogger("hindsight.cli")


def _settings(data_dir: Path | None, bootstrap: str | None) -> AllSettings:
    cfg = AllSettings()
    if data_dir is not None:
        cfg.runtime.data_dir = data_dir
    if bootstrap:
        cfg.kafka.bootstrap = bootstrap
    configure_logging(cfg.runtime)
    return cfg


def _fail(exc: BaseException) -> typer.Exit:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    return typer.Exit(2)


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
    from services.cli.embedded import embedded_stack  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    cfg = _settings(data_dir, bootstrap)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with embedded_stack(cfg, GatewaySettings(port=port)) as stack:
            typer.echo(
                f"hindsight up: gateway {stack.gateway_url} (MCP at {stack.gateway_url}/mcp), "
                f"Kafka {stack.bootstrap}, data in {cfg.runtime.data_dir}"
            )
            await stop.wait()

    try:
        asyncio.run(main())
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
    top_k: Annotated[int, typer.Option(help="Memories per recall (>= 10 is used for recall@10).")] = 10,
    data_dir: Annotated[Path | None, typer.Option(help="Where local stores keep their files.")] = None,
    bootstrap: Annotated[
        str | None, typer.Option(help="Use this Kafka instead of the embedded broker.")
    ] = None,
    timeout_s: Annotated[
        float, typer.Option(help="Max seconds to wait for the pipeline to catch up.")
    ] = 1800.0,
) -> None:
    """Publish real conversations as Kafka events, wait for lag 0, recall through the gateway, print JSON.

    Default: conversation conv-26 of ../shared/data/locomo_dev.json on the embedded default.
    """
    import tempfile  # noqa: PLC0415

    from hindsight.eval import locomo  # noqa: PLC0415
    from services.cli.demo import read_jsonl, run_demo  # noqa: PLC0415
    from services.cli.embedded import embedded_stack  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    workdir = data_dir or Path(tempfile.mkdtemp(prefix="hindsight-demo-"))
    cfg = _settings(workdir, bootstrap)
    api_key = "dev-demo-key"
    try:
        if jsonl is not None:
            events = read_jsonl(jsonl)
            questions: list[locomo.Question] = []
            n_conv = len({(e.tenant_id, e.user_id) for e in events})
            tenants = sorted({e.tenant_id for e in events})
        else:
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
    gateway = GatewaySettings(port=0, api_keys={api_key: tenants[0]} if tenants else {})
    typer.echo(
        f"demo: {n_conv} conversation(s), {len(events)} events, {len(questions)} questions; "
        f"data in {workdir}",
        err=True,
    )

    async def main() -> str:
        async with embedded_stack(cfg, gateway) as stack:
            result = await run_demo(
                stack, api_key, events, questions, conversations=n_conv, top_k=top_k, timeout_s=timeout_s
            )
            typer.echo(f"per category recall@10: {json.dumps(result.by_category)}", err=True)
            return result.line()

    try:
        line = asyncio.run(main())
    except (HindsightError, TimeoutError) as exc:
        raise _fail(exc) from exc
    typer.echo(line)


@app.command("mcp-stdio")
def mcp_stdio() -> None:
    """Serve the MCP tools over stdio (API key from HINDSIGHT_API_KEY; needs HINDSIGHT_KAFKA_BOOTSTRAP)."""
    from services.gateway.app import run_stdio  # noqa: PLC0415

    try:
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


def main() -> None:
    """Console-script entry point."""
    app(prog_name="hindsight")
