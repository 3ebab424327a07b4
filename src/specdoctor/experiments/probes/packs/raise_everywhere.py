"""Handlers of the raise-everywhere pack: each fails, on purpose."""


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("this object refuses to be printed")


def boom(call):  # noqa: ANN001, ANN201
    raise RuntimeError("this probe handler raises on every call")


def unprintable(call):  # noqa: ANN001, ANN201
    return [{"value": Unprintable()}, Unprintable()]
