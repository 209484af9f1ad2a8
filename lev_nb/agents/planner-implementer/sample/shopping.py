"""A tiny shopping-list helper: lines like '3 x apples @ 0.50' (quantity, item, unit price)."""


def parse_line(line):
    """'3 x apples @ 0.50' -> ('apples', 3, 0.5)"""
    qty, rest = line.split(" x ", 1)
    name, price = rest.split(" @ ")
    return name.strip(), int(qty), float(price)


def total(lines):
    """The cost of every line."""
    return sum(qty * price for _, qty, price in (parse_line(line) for line in lines))
