"""Render the memlens icon set: a lens over a stack of memory cards, drawn with QPainter.

    python packaging/make_icons.py            # writes resources/icons/memlens-{16..512}.png

No SVG and no external image: every size is painted directly (not scaled down from 512), and
the two smallest sizes drop the card text and thicken every stroke so they stay legible at
16 and 32 px. The PNGs are committed; re-run this after changing the drawing.

Drawing units are a 512 x 512 canvas; the painter is scaled to the target size.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SIZES = (16, 32, 48, 64, 128, 256, 512)
APP_ID = "io.github.memlens.Memlens"
OUT_DIR = Path(__file__).resolve().parent.parent / "resources" / "icons"

# Palette: a deep blue tile, slate cards, an amber lens and evidence span.
TILE_TOP, TILE_BOTTOM = "#2563eb", "#1e3a8a"
CARD_BACK, CARD_MID, CARD_FRONT = "#94a3b8", "#cbd5e1", "#f8fafc"
CARD_EDGE = "#0f172a"
TEXT_LINE = "#94a3b8"
SPAN = "#f59e0b"
RING = "#fbbf24"
RING_EDGE = "#78350f"
HANDLE = "#0f172a"

LENS_CENTER = (300.0, 300.0)
LENS_RADIUS = 104.0
MAGNIFY = 1.55


def _qt():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.instance() or QGuiApplication([sys.argv[0]])


def _cards(p, small: bool) -> None:
    """The stack: back and middle cards, then the front card with its text lines."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QColor, QPen

    edge = QPen(QColor(CARD_EDGE), 10 if small else 6)
    edge.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(edge)
    stack = [(84, 84, CARD_BACK), (136, 156, CARD_FRONT)] if small else \
        [(80, 84, CARD_BACK), (108, 122, CARD_MID), (136, 160, CARD_FRONT)]
    for x, y, colour in stack:
        p.setBrush(QColor(colour))
        p.drawRoundedRect(QRectF(x, y, 264, 184), 24, 24)
    if small:
        return
    line = QPen(QColor(TEXT_LINE), 16, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap)
    p.setPen(line)
    for y, length in ((204, 200), (240, 168), (276, 188), (312, 120)):
        p.drawLine(168, y, 168 + length, y)


def _span(p, small: bool) -> None:
    """The evidence span the lens finds: one text line in amber."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QColor, QPen

    p.setPen(QPen(QColor(SPAN), 30 if small else 18, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    if small:
        p.drawLine(200, 292, 340, 292)
    else:
        p.drawLine(232, 276, 356, 276)


def _lens(p, small: bool) -> None:
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtGui import QBrush, QColor, QPainterPath, QPen, QRadialGradient

    cx, cy = LENS_CENTER
    r = LENS_RADIUS + (8 if small else 0)
    centre = QPointF(cx, cy)

    # Handle first, so the ring covers its root. 45 degrees down-right, round cap.
    start = QPointF(cx + r * 0.72, cy + r * 0.72)
    end = QPointF(cx + r * 1.42, cy + r * 1.42)
    p.setPen(QPen(QColor(HANDLE), 64 if small else 52, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    p.drawLine(start, end)
    p.setPen(QPen(QColor(RING), 30 if small else 22, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    p.drawLine(QPointF(cx + r * 1.18, cy + r * 1.18), end)

    # Inside the glass: the cards magnified about the lens centre, the span in amber.
    glass = QPainterPath()
    glass.addEllipse(centre, r, r)
    p.save()
    p.setClipPath(glass)
    p.fillPath(glass, QColor(CARD_FRONT))
    p.translate(centre)
    p.scale(MAGNIFY, MAGNIFY)
    p.translate(-centre)
    _cards(p, small)
    _span(p, small)
    p.restore()

    shine = QRadialGradient(QPointF(cx - r * 0.35, cy - r * 0.4), r * 1.1)
    shine.setColorAt(0.0, QColor(255, 255, 255, 120))
    shine.setColorAt(0.6, QColor(255, 255, 255, 0))
    p.fillPath(glass, QBrush(shine))

    p.setBrush(Qt.BrushStyle.NoBrush)
    p.setPen(QPen(QColor(RING_EDGE), 44 if small else 34))
    p.drawEllipse(centre, r, r)
    p.setPen(QPen(QColor(RING), 30 if small else 22))
    p.drawEllipse(centre, r, r)


def render(size: int):
    """One icon as a QImage of size x size (transparent outside the rounded tile)."""
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QColor, QImage, QLinearGradient, QPainter

    _qt()
    small = size <= 32
    img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    try:
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.scale(size / 512.0, size / 512.0)
        tile = QLinearGradient(QPointF(0, 16), QPointF(0, 496))
        tile.setColorAt(0.0, QColor(TILE_TOP))
        tile.setColorAt(1.0, QColor(TILE_BOTTOM))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(tile)
        margin = 8 if small else 16
        p.drawRoundedRect(QRectF(margin, margin, 512 - 2 * margin, 512 - 2 * margin), 96, 96)
        _cards(p, small)
        _lens(p, small)
    finally:
        p.end()
    return img


def icon_path(size: int, out_dir: Path = OUT_DIR) -> Path:
    return out_dir / f"memlens-{size}.png"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_dir = Path(argv[0]) if argv else OUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    for size in SIZES:
        path = icon_path(size, out_dir)
        if not render(size).save(str(path), "PNG"):
            sys.stderr.write(f"make_icons: could not write {path}\n")
            return 1
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
