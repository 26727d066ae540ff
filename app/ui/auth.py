"""Login state and role checks for pages (the services check roles again)."""

import functools

import streamlit as st
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import (
    SessionCheck,
    authenticate,
    end_session,
    open_session,
    resume_session,
    revalidate,
    user_for_identity,
)
from itsmreview.db import session_scope, write_transaction
from itsmreview.errors import ItsmReviewError, PermissionDenied
from itsmreview.ui.preload import preload_grid_and_code
from itsmreview.ui.text import literal

USER_KEY = "itsmreview_user"
TOKEN_KEY = "itsmreview_token"
REFUSED_KEY = "itsmreview_refused_token"
ENDED_KEY = "itsmreview_session_ended"
COOKIE = "itsmreview_session"


def _cookie_token() -> str | None:
    """The login token the browser sent when this page was loaded (None if none)."""
    token = _sent_cookie()
    if token is None or token == st.session_state.get(REFUSED_KEY):
        return None
    return token


def _sent_cookie() -> str | None:
    token = st.context.cookies.get(COOKIE)
    return token if isinstance(token, str) and token else None


def current_user() -> User | None:
    """The logged-in user as the database has them now. A reload or a link finds the login
    again from the browser's cookie; a deactivated user, one whose sessions were ended (role
    change, password reset) or one who logged out in another tab is logged out on the next
    rerun."""
    data = st.session_state.get(USER_KEY)
    token = st.session_state.get(TOKEN_KEY) if data else _cookie_token()
    if not data and not token:
        return None
    try:
        with session_scope() as session:
            if token:
                user = resume_session(session=session, token=token)
            else:  # single sign-on keeps its own cookie
                user = revalidate(session=session, check=SessionCheck(data["id"], data["epoch"]))
            _remember(user)
            if token:
                st.session_state[TOKEN_KEY] = token
    except PermissionDenied as exc:
        st.session_state.pop(USER_KEY, None)
        st.session_state.pop(TOKEN_KEY, None)
        st.session_state[REFUSED_KEY] = token
        if data:
            st.session_state[ENDED_KEY] = str(exc)
        return None
    # the epoch travels with the user: a write checks it again when it commits
    # (accounts.acting), so a tab drawn before the account changed writes nothing
    data = st.session_state[USER_KEY]
    return User(**{k: v for k, v in data.items() if k != "epoch"}, session_epoch=data["epoch"])


def end_here(message: str) -> None:
    """A write found this tab's session ended: forget the login here and say why on the
    login form the next run shows."""
    if token := st.session_state.pop(TOKEN_KEY, None):
        st.session_state[REFUSED_KEY] = token
    st.session_state.pop(USER_KEY, None)
    st.session_state[ENDED_KEY] = message[:1].upper() + message[1:]


def session_ended_message() -> str | None:
    """Why the session was ended, once (shown on the login page)."""
    return st.session_state.pop(ENDED_KEY, None)


def _remember(user: User) -> None:
    st.session_state[USER_KEY] = {
        "id": user.id,
        "username": user.username,
        "display_name": user.display_name,
        "role": Role(user.role),
        "expertise": list(user.expertise),
        "active": user.active,
        "password_hash": "",
        "epoch": user.session_epoch,
    }


def _client_address() -> str | None:
    """The address of the browser's connection (None where Streamlit does not know it)."""
    address = st.context.ip_address
    return address if isinstance(address, str) and address else None


def log_in(username: str, password: str) -> User:
    """Check the password and open a login that the browser keeps in a cookie."""

    def open_login(session):
        user = authenticate(
            session=session, username=username, password=password, address=_client_address()
        )
        return user, open_session(session=session, user=user)

    user, token = write_transaction(open_login)
    _remember(user)
    st.session_state[TOKEN_KEY] = token
    return user


def sso_configured() -> bool:
    """Single sign-on is on when Streamlit's secrets have an [auth] section (st.login)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def adopt_sso_identity() -> None:
    """After st.login, map the identity's e-mail to a local account (roles stay local)."""
    if USER_KEY in st.session_state or not sso_configured():
        return
    if not st.user.get("is_logged_in"):
        return
    with session_scope() as session:
        _remember(user_for_identity(session=session, email=st.user.get("email")))


def log_out() -> None:
    """End the login everywhere it is open (its cookie is cleared on the next run)."""
    if token := st.session_state.pop(TOKEN_KEY, None):
        write_transaction(lambda session: end_session(session=session, token=token))
        st.session_state[REFUSED_KEY] = token
    st.session_state.pop(USER_KEY, None)
    if sso_configured() and st.user.get("is_logged_in"):
        st.logout()


def login_form() -> User | None:
    """The login form; the user once their password is accepted (errors are shown)."""
    with st.form("login"):
        username = st.text_input("Username", key="login_username")
        password = st.text_input("Password", type="password", key="login_password")
        submitted = st.form_submit_button("Log in", type="primary")
    if sso_configured():
        st.divider()
        if st.button("Log in with single sign-on"):
            st.login()
    preload_grid_and_code()
    if not submitted:
        return None
    try:
        return log_in(username, password)
    except ItsmReviewError as exc:
        st.error(literal(str(exc)))
        return None


def require(*roles: Role) -> User:
    """The logged-in user if it has one of `roles` (admins pass); otherwise stop the page.
    Without a login the page asks for one and opens once it is given (a link to a page
    works before logging in)."""
    user = current_user()
    if user is None:
        if ended := session_ended_message():
            st.warning(ended)
        st.info("Log in to open this page.")
        if login_form() is not None:
            st.rerun()
        st.stop()
    if user.role != Role.admin and user.role not in roles:
        st.error(PermissionDenied(f"This page needs the {' or '.join(roles)} role.").args[0])
        st.stop()
    return user


START_PAGES = {
    Role.expert: "views/queue.py",
    Role.lead: "views/dashboard.py",
    Role.admin: "views/users.py",
}


def start_page(user: User) -> str:
    """The page a user lands on after logging in, relative to the entry script (the home
    page for a role without one; `authenticate` never lets a model rater in)."""
    return START_PAGES.get(Role(user.role), "views/home.py")


_COOKIE_JS = r"""
export default function ({ data }) {
  const scope = "; Path=/; SameSite=Strict" + (location.protocol === "https:" ? "; Secure" : "");
  const base = `${data.name}=`;
  const cookies = document.cookie.split("; ");
  if (data.token) {
    if (!cookies.includes(base + data.token)) {
      document.cookie = `${base}${data.token}; Max-Age=${data.max_age}${scope}`;
    }
  } else if (cookies.some((c) => c.startsWith(base))) {
    document.cookie = `${base}; Max-Age=0${scope}`;
  }
}
"""


@functools.cache
def _cookie_component():
    return st.components.v2.component("itsmreview.session", js=_COOKIE_JS)


def keep_session_cookie() -> None:
    """Write this tab's login token into the browser's cookie, or clear a cookie whose login
    ended; run on every page (it draws nothing)."""
    import hashlib

    from itsmreview.settings import get_settings

    token = st.session_state.get(TOKEN_KEY)
    if token is None and _sent_cookie() is None:
        return
    tag = hashlib.sha256((token or "").encode()).hexdigest()[:12]
    _cookie_component()(
        key=f"session-cookie-{tag}",
        data={
            "name": COOKIE,
            "token": token,
            "max_age": int(get_settings().session_hours * 3600),
        },
    )
