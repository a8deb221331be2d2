"""Hand-written SVG for the project's plots (scripts/bench-plot.py,
scripts/pair-compare.py): no plotting package to install on the host."""
import math


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def num(v):
    """A value a log axis can show: a finite number above zero."""
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def log_axis(values, pad=1.5):
    """Whole decades around the plottable values, with room on both sides."""
    vals = [v for v in values if num(v)] or [1.0]
    lo = 10 ** math.floor(math.log10(min(vals) / pad))
    hi = 10 ** math.ceil(math.log10(max(vals) * pad))
    return lo, hi


def document(w, h, title, body, font_size=11):
    """The SVG text of a w x h white page with a centred title over body (elements)."""
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'font-family="sans-serif" font-size="{font_size}">',
            f'<rect width="{w}" height="{h}" fill="white"/>',
            f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">{esc(title)}</text>']
    return "\n".join(head + body + ["</svg>"]) + "\n"


class Panel:
    """A plot area at (x, y) of w x h with a log y axis from lo to hi (decades)."""

    def __init__(self, e, x, y, w, h, lo, hi, ylabel):
        self.e, self.x, self.y, self.w, self.h, self.lo, self.hi = e, x, y, w, h, lo, hi
        e.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none" stroke="#888"/>')
        d = lo
        while d <= hi * 1.0001:
            yy = self.ty(d)
            e.append(f'<line x1="{x}" x2="{x + w}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e4e4e4"/>')
            e.append(f'<text x="{x - 5}" y="{yy + 4:.1f}" text-anchor="end">{d:g}</text>')
            d *= 10
        e.append(f'<text x="{x - 48}" y="{y + h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 {x - 48} {y + h / 2})">{esc(ylabel)}</text>')

    def ty(self, v):
        f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return self.y + self.h * (1 - f)
