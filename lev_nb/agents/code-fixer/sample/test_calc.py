from calc import clamp, percent


def test_percent():
    assert percent(1, 4) == 25.0
    assert percent(3, 0) == 0.0


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
