"""``lev models list`` and ``lev models show``: the models each provider offers on this install
(cli.md ``lev models``). The data comes from :mod:`lev_nb.providers.listing`; this module prints it.

``list`` exits 1 when ``--provider`` names nothing lev_nb can call, and when a provider script or a
remote listing fails for the provider named; a provider the catalogue knows but this install has
no key for is an empty table and exit 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lev_nb.cli.dispatch import chosen_action, settings_or_none


def add_models(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev models``."""
    models = subparsers.add_parser(
        "models", help="list the models each provider offers here, or show one",
        description=("The models of each configured provider: a built-in catalogue (with your "
                     "[model_capabilities] corrections), a provider script's list_models, or, with "
                     "--remote, the provider's own list (/v1/models for OpenAI-compatible servers)."),
        epilog=("examples:\n  lev models list\n  lev models list -p ollama --remote\n"
                "  lev models show openai/gpt-4.1"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = models.add_subparsers(dest="models_action", metavar="ACTION", title="actions",
                                    help="list or show")
    listing = actions.add_parser("list", help="the models of each configured provider")
    listing.add_argument("-p", "--provider", default=None, help="only this provider")
    listing.add_argument("-r", "--remote", action="store_true", help="ask the providers' APIs (slower)")
    listing.add_argument("-a", "--all", action="store_true", help="include providers with no key here")
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="what one model can do, as a run will use it")
    show.add_argument("model", help="PROVIDER/MODEL, or a model id with --provider")
    show.add_argument("-p", "--provider", default=None, help="the model's provider")
    show.add_argument("-r", "--remote", action="store_true", help="also check the provider's own list")
    show.add_argument("--json", action="store_true", help="print JSON")
    models.set_defaults(func=run_models)


def run_models(args: argparse.Namespace) -> int:
    """``lev models list|show``; returns the exit status."""
    action = chosen_action(args, "models", ("list", "show"))
    if action is None:
        return 2
    settings = settings_or_none()
    if settings is None:
        return 1
    if action == "list":
        return _list(args, settings)
    return _show(args, settings)


def _known(settings: Any) -> str:
    from lev_nb.providers.resolve import known_providers

    return ", ".join(n for n in known_providers(settings) if n != "mock")


def _list(args: argparse.Namespace, settings: Any) -> int:
    from lev_nb.providers.listing import UnknownProvider, list_models

    try:
        listings = list_models(settings, args.provider, remote=args.remote, every=args.all)
    except UnknownProvider as exc:
        print(f"lev models: no provider named '{exc}' here (the providers lev_nb calls: {_known(settings)}; "
              "a script provider is $LEV_HOME/providers/<name>.rhai)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([{"provider": p.provider, "configured": p.configured, "error": p.error,
                           "models": [r.to_dict() for r in p.rows]} for p in listings], indent=2))
    else:
        _print_listings(listings, args)
    failed = [p for p in listings if p.error is not None and (args.provider is not None or p.configured)]
    return 1 if failed and args.provider is not None else 0


def _print_listings(listings: list[Any], args: argparse.Namespace) -> None:
    if not listings:
        print("No provider is configured here: set ANTHROPIC_API_KEY or OPENAI_API_KEY, run an Ollama "
              "server, or configure one (lev models list --all shows every built-in provider).")
        return
    for listing in listings:
        state = "" if listing.configured else "  (no key here)"
        print(f"{listing.provider}{state}")
        if listing.error is not None:
            print(f"  cannot list: {listing.error}", file=sys.stderr if args.provider else sys.stdout)
            continue
        if not listing.rows:
            if not listing.configured:  # as the upstream: an empty table where there is no key
                print("  no models listed without a key for it here (--all lists its built-in catalogue)")
                continue
            hint = "" if args.remote else " (none in the built-in catalogue; try --remote)"
            print(f"  no models{hint}")
            continue
        width = max(len(r.model) for r in listing.rows) + 2
        for row in listing.rows:
            info = row.info
            price = "" if row.price is None else f"  ${row.price[0]:g}/${row.price[1]:g} per Mtok"
            tools = "" if info.supports_tools else "  no tools"
            print(f"  {row.model.ljust(width)}{_tokens(info.max_context_tokens):>7} context{tools}{price}")


def _tokens(count: int) -> str:
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    if count >= 1000:
        return f"{round(count / 1000)}K"
    return str(count)


def _show(args: argparse.Namespace, settings: Any) -> int:
    from lev_nb.providers.base import ProviderError
    from lev_nb.providers.listing import UnknownProvider, show_model
    from lev_nb.providers.resolve import is_configured

    try:
        row, listed = show_model(settings, args.model, args.provider, remote=args.remote)
    except UnknownProvider as exc:
        print(f"lev models show: '{exc}' names no provider or known model; write PROVIDER/MODEL "
              f"(providers: {_known(settings)})", file=sys.stderr)
        return 1
    except ProviderError as exc:
        print(f"lev models show: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        data = row.to_dict()
        data["configured"] = is_configured(row.provider, settings)
        data["listed_by_provider"] = listed
        print(json.dumps(data, indent=2))
        return 0
    info = row.info
    lines = [f"{row.provider}/{row.model}",
             f"  provider configured here: {'yes' if is_configured(row.provider, settings) else 'no'}",
             f"  in the built-in catalogue: {'yes' if info.known else 'no (conservative assumptions)'}",
             f"  context window: {info.max_context_tokens} tokens",
             f"  longest answer: {info.max_output_tokens or 'not known'}",
             f"  tools: {'yes' if info.supports_tools else 'no'}   streaming: {'yes' if info.supports_streaming else 'no'}"
             f"   temperature: {'yes' if info.supports_temperature else 'no'}"]
    if info.corrected:
        lines.append(f"  corrected by [model_capabilities]: {', '.join(info.corrected)}")
    if row.price is not None:
        lines.append(f"  price: ${row.price[0]:g} input, ${row.price[1]:g} output per million tokens")
    else:
        lines.append("  price: not known (its calls are counted, not priced)")
    if listed is not None:
        lines.append(f"  listed by the provider: {'yes' if listed else 'NO - the server does not offer it'}")
    print("\n".join(lines))
    return 0 if listed is not False else 1
