"""Small arithmetic helpers for the report generator."""


def percent(part, whole):
    """What share of ``whole`` ``part`` is, in percent (0 when ``whole`` is 0)."""
    if whole == 0:
        return 0.0
    return part / whole * 10


def clamp(value, low, high):
    """``value`` kept within [low, high]."""
    return max(low, min(value, high))
