"""`itsmreview` commands: user accounts."""

import sys
from typing import Annotated

import typer
from itsmreview.cli.base import app, boundary, echo_json, ensure_schema, open_session, operator

users_app = typer.Typer(help="User accounts (experts, leads, admins).", no_args_is_help=True)
app.add_typer(users_app, name="users")


@users_app.command("add")
@boundary
def users_add(
    name: Annotated[str, typer.Argument(help="Login name: lowercase letters, digits, . _ -")],
    role: Annotated[str, typer.Option(help="expert, lead or admin.")],
    display_name: Annotated[str | None, typer.Option(help="Name shown in the app.")] = None,
    email: Annotated[
        str | None, typer.Option(help="E-mail address single sign-on maps to this account.")
    ] = None,
    expertise: Annotated[
        list[str] | None, typer.Option(help="A persona the expert knows (repeatable).")
    ] = None,
    ask: Annotated[
        bool, typer.Option("--ask", help="Ask for the password instead of generating one.")
    ] = False,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Add a user; without --ask or --password-stdin a password is generated and printed once."""
    from itsmreview.accounts.service import create_user

    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif ask:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    ensure_schema()
    with open_session() as session:
        user, generated = create_user(
            session=session,
            username=name,
            role=role,
            password=password,
            display_name=display_name,
            expertise=expertise or (),
            email=email,
        )
    typer.echo(f"added {user.username} ({user.role})")
    if generated:
        typer.echo(f"password: {generated}  (shown once; store it now)")


@users_app.command("list")
@boundary
def users_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List users with their roles."""
    from itsmreview.accounts.models import UserPublic
    from itsmreview.accounts.service import users_overview

    ensure_schema()
    with open_session() as session:
        users = [
            UserPublic.model_validate(u, from_attributes=True)
            for u in users_overview(session=session, actor=operator())
        ]
    if as_json:
        echo_json([u.model_dump(mode="json") for u in users])
        return
    for user in users:
        state = "" if user.active else "  (deactivated)"
        typer.echo(f"{user.username:<16} {user.role.value:<7} {user.display_name}{state}")


def _show(user) -> None:
    state = "active" if user.active else "deactivated"
    typer.echo(f"{user.username}: {user.role}, {state}")


@users_app.command("deactivate")
@boundary
def users_deactivate(
    name: Annotated[str, typer.Argument(help="Login name.")],
) -> None:
    """Deactivate a user: no more logins, and their open sessions end at once."""
    from itsmreview.accounts.service import set_active

    ensure_schema()
    with open_session() as session:
        _show(set_active(session=session, actor=operator(), username=name, active=False))


@users_app.command("activate")
@boundary
def users_activate(
    name: Annotated[str, typer.Argument(help="Login name.")],
) -> None:
    """Let a deactivated user log in again."""
    from itsmreview.accounts.service import set_active

    ensure_schema()
    with open_session() as session:
        _show(set_active(session=session, actor=operator(), username=name, active=True))


@users_app.command("set-role")
@boundary
def users_set_role(
    name: Annotated[str, typer.Argument(help="Login name.")],
    role: Annotated[str, typer.Argument(help="expert, lead or admin.")],
) -> None:
    """Change a user's role; their open sessions end, so the new role applies at once."""
    from itsmreview.accounts.service import set_role

    ensure_schema()
    with open_session() as session:
        _show(set_role(session=session, actor=operator(), username=name, role=role))


@users_app.command("set-profile")
@boundary
def users_set_profile(
    name: Annotated[str, typer.Argument(help="Login name.")],
    display_name: Annotated[str | None, typer.Option("--name", help="New display name.")] = None,
    expertise: Annotated[
        str | None,
        typer.Option(help="New expertise: personas, comma-separated ('' clears it)."),
    ] = None,
) -> None:
    """Change a user's display name or expertise; their open sessions go on."""
    from itsmreview.accounts.service import set_profile

    personas = None if expertise is None else expertise.split(",")
    ensure_schema()
    with open_session() as session:
        user = set_profile(
            session=session,
            actor=operator(),
            username=name,
            display_name=display_name,
            expertise=personas,
        )
        typer.echo(f"{user.username}: {user.display_name}; expertise: {_personas(user)}")


def _personas(user) -> str:
    return ", ".join(user.expertise or []) or "-"


@users_app.command("reset-password")
@boundary
def users_reset_password(
    name: Annotated[str, typer.Argument(help="Login name.")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the new password from standard input.")
    ] = False,
) -> None:
    """Give a user a new password (generated and printed once unless --password-stdin); their
    open sessions end and their login throttling is lifted."""
    from itsmreview.accounts.service import reset_password

    password = sys.stdin.readline().rstrip("\n") if password_stdin else None
    ensure_schema()
    with open_session() as session:
        user, generated = reset_password(
            session=session, actor=operator(), username=name, password=password
        )
    typer.echo(f"password of {user.username} reset; open sessions ended")
    if generated:
        typer.echo(f"password: {generated}  (shown once; store it now)")
