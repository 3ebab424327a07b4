"""Handlers of the raise-everywhere pack: each fails, on purpose."""


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("this object refuses to be printed")


def boom(call):
    raise RuntimeError("this probe handler raises on every call")


def unprintable(call):
    return [{"value": Unprintable()}, Unprintable()]
