"""expect(): the Python tests' ranks check a raised error with it.

    from expect import expect
    e = expect(chorus.InvalidArgument, lambda: comm.allreduce(x, op="xor"), "op 'xor'")
"""


def expect(cls, fn, *needles):
    """Runs fn(); it must raise `cls` with every needle in the message.
    Returns the exception; anything else (another class, nothing) fails."""
    try:
        fn()
    except cls as e:
        text = str(e)
        for needle in needles:
            assert needle in text, f"{cls.__name__} message lacks {needle!r}: {text}"
        return e
    except BaseException as e:  # noqa: BLE001 - anything else is the failure reported
        raise AssertionError(f"expected {cls.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {cls.__name__}, nothing was raised")
