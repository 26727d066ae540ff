from itsmreview.accounts.models import Role, User
from sqlmodel import Session, select


def user_by_username(*, session: Session, username: str) -> User | None:
    return session.exec(select(User).where(User.username == username)).first()


def list_users(*, session: Session, role: Role | None = None) -> list[User]:
    query = select(User).order_by(User.role, User.username)
    if role is not None:
        query = query.where(User.role == role)
    return list(session.exec(query).all())


def user_by_email(*, session: Session, email: str) -> User | None:
    return session.exec(select(User).where(User.email == email)).first()
