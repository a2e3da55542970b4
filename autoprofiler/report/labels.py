"""Label placement on a matplotlib axes, measured in display pixels: each label goes to the
first of its candidate positions where its box stays inside the plot frame and overlaps no
label, leader line or marker already there, nor anything else marked to avoid (the position
that clashes least when every one is taken); markers are kept whole inside the frame by
widening the view.

A point's label is tried on rings around its marker, nearest first, then anywhere in the
frame, nearest first. Set right beside its marker, a label must be clearly nearer to it than
to any other marker; further off, it is joined to its marker by a thin leader line that crosses
nothing taken.

The figure needs a canvas that can measure text (``FigureCanvasAgg``), and its layout must be
final (limits, scales and axes positions) before anything is placed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy
from matplotlib.axes import Axes
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

PAD_PX = 2.0  # room kept around every label box
_RADII_PT = (8, 16, 26, 36, 48, 60, 74, 90, 108, 130)
_DIRECTIONS = 16
_GRID_PX = 10.0  # spacing of the positions tried anywhere in the frame
_LEADER = {"arrowstyle": "-", "color": "#888", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 5}
_LEADER_PIECE_PX = 4.0
# Clashes, worst first: a box reaching out of the frame (per pixel), overlapping anything
# (per box, plus the area shared), a label nearer to another marker or a leader line crossing
# something (per thing crossed).
_OUTSIDE = 1e7
_OVERLAP = 1e5
_AMBIGUOUS = 1e3


@dataclass(frozen=True)
class Spot:
    """A marker at data ``(x, y)`` of area ``size_pt2`` (as scatter's ``s``) and its label."""

    x: float
    y: float
    label: str
    size_pt2: float


def overlap(a: Bbox, b: Bbox) -> float:
    """The area two boxes share (0 when they do not overlap)."""
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(width, 0.0) * max(height, 0.0)


def outside(box: Bbox, frame: Bbox) -> float:
    """How far, in pixels summed over the four sides, ``box`` reaches out of ``frame``."""
    return (
        max(frame.x0 - box.x0, 0.0)
        + max(box.x1 - frame.x1, 0.0)
        + max(frame.y0 - box.y0, 0.0)
        + max(box.y1 - frame.y1, 0.0)
    )


def marker_box(axes: Axes, x: float, y: float, size_pt2: float) -> Bbox:
    """The display box of a scatter marker of area ``size_pt2`` (points squared) at data
    ``(x, y)``."""
    cx, cy = axes.transData.transform((x, y))
    radius = size_pt2**0.5 / 2 * axes.figure.dpi / 72
    return Bbox.from_extents(cx - radius, cy - radius, cx + radius, cy + radius)


def fit_markers(axes: Axes, spots: Sequence[Spot], pad_px: float = 4.0) -> None:
    """Widen the view until every marker lies whole inside the frame, ``pad_px`` from it, and
    fix the limits there."""
    for _ in range(8):
        frame = axes.get_window_extent()
        boxes = [marker_box(axes, s.x, s.y, s.size_pt2) for s in spots]
        left = max(frame.x0 + pad_px - min(b.x0 for b in boxes), 0.0)
        right = max(max(b.x1 for b in boxes) + pad_px - frame.x1, 0.0)
        bottom = max(frame.y0 + pad_px - min(b.y0 for b in boxes), 0.0)
        top = max(max(b.y1 for b in boxes) + pad_px - frame.y1, 0.0)
        if not any((left, right, bottom, top)):
            break
        inverse = axes.transData.inverted()
        x0, y0 = inverse.transform((frame.x0 - 1.5 * left, frame.y0 - 1.5 * bottom))
        x1, y1 = inverse.transform((frame.x1 + 1.5 * right, frame.y1 + 1.5 * top))
        axes.set_xlim(x0, x1)
        axes.set_ylim(y0, y1)
    axes.set_xlim(axes.get_xlim())
    axes.set_ylim(axes.get_ylim())


def text_box(text: Text) -> Bbox:
    """The display box of a text's letters (an annotation's leader line left out)."""
    renderer = text.figure.canvas.get_renderer()
    if isinstance(text, Annotation):
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def _centre(box: Bbox) -> tuple[float, float]:
    return (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2


def _distance(a: Bbox, b: Bbox) -> float:
    """The gap between two boxes in pixels (0 when they touch or overlap)."""
    return math.hypot(max(a.x0 - b.x1, b.x0 - a.x1, 0.0), max(a.y0 - b.y1, b.y0 - a.y1, 0.0))


def _alignment(dx: float, dy: float) -> tuple[str, str]:
    """The (ha, va) of a label set off its anchor by ``(dx, dy)``: away from the anchor."""
    length = math.hypot(dx, dy) or 1.0
    ha = "left" if dx > 0.3 * length else ("right" if dx < -0.3 * length else "center")
    va = "bottom" if dy > 0.3 * length else ("top" if dy < -0.3 * length else "center")
    return ha, va


def _ring_offsets() -> Iterator[tuple[float, float]]:
    """Offsets in points on rings around an anchor, the nearest ring first."""
    for radius in _RADII_PT:
        for k in range(_DIRECTIONS):
            angle = 2 * math.pi * k / _DIRECTIONS
            yield radius * math.cos(angle), radius * math.sin(angle)


@dataclass(frozen=True)
class _Candidate:
    """A label position: the offset from the anchor in points, its alignment, its box."""

    dx_pt: float
    dy_pt: float
    ha: str
    va: str
    box: Bbox
    leader: bool


class LabelPlacer:
    """Places labels on ``axes`` so that none overlaps another, a leader line, a marker of
    ``spots`` or anything given to ``avoid`` (see the module docstring)."""

    def __init__(self, axes: Axes, spots: Sequence[Spot] = ()) -> None:
        self.axes = axes
        self.frame = axes.get_window_extent()
        self.spots = list(spots)
        self.markers = [marker_box(axes, s.x, s.y, s.size_pt2) for s in self.spots]
        self.taken: list[Bbox] = []
        self._extents = numpy.zeros((0, 4))
        self._marker = numpy.zeros(0, dtype=bool)
        for box in self.markers:
            self.avoid(box, marker=True)

    def avoid(self, box: Bbox, marker: bool = False) -> None:
        """Keep every label placed from now on off ``box`` (a ``marker``'s, or another)."""
        self.taken.append(box)
        self._extents = numpy.vstack([self._extents, box.extents])
        self._marker = numpy.append(self._marker, marker)

    def avoid_path(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        """Keep labels off the line through data points ``(xs, ys)`` (each segment's box:
        exact for the level and upright segments of a step line)."""
        points = self.axes.transData.transform(list(zip(xs, ys)))
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            segment = Bbox.from_extents(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
            self.avoid(segment.padded(1.0))

    def _clash(self, box: Bbox) -> float:
        """How badly ``box`` (padded) clashes with what is taken and with the frame."""
        x0, y0, x1, y1 = box.padded(PAD_PX).extents
        taken = self._extents
        width = numpy.minimum(taken[:, 2], x1) - numpy.maximum(taken[:, 0], x0)
        height = numpy.minimum(taken[:, 3], y1) - numpy.maximum(taken[:, 1], y0)
        shared = numpy.clip(width, 0, None) * numpy.clip(height, 0, None)
        overlaps = _OVERLAP * int((shared > 0).sum()) + float(shared.sum())
        return overlaps + _OUTSIDE * outside(box.padded(PAD_PX), self.frame)

    def place(self, candidates: Iterable[Callable[[], Text]]) -> Text:
        """The first text the ``candidates`` add to the axes that clashes with nothing; the
        others are removed. When none is free, the one that clashes least is kept."""
        best: tuple[float, Text] | None = None
        for make in candidates:
            text = make()
            clash = self._clash(text_box(text))
            if best is None or clash < best[0]:
                if best is not None:
                    best[1].remove()
                best = (clash, text)
            else:
                text.remove()
            if clash == 0:
                break
        if best is None:
            raise ValueError("no candidate position to place a label at")
        self.avoid(text_box(best[1]).padded(PAD_PX))
        return best[1]

    def label(self, spot: Spot, **style: object) -> Annotation:
        """``spot``'s label beside its marker (see the module docstring)."""
        own = marker_box(self.axes, spot.x, spot.y, spot.size_pt2)
        probe = self.axes.annotate(spot.label, (spot.x, spot.y), **style)
        size = text_box(probe)
        probe.remove()
        best: tuple[float, _Candidate] | None = None
        for candidate in self._candidates(own, size.width, size.height):
            clash = self._clash(candidate.box) + self._penalty(candidate, own)
            if best is None or clash < best[0]:
                best = (clash, candidate)
            if clash == 0:
                break
        assert best is not None
        chosen = best[1]
        label = self.axes.annotate(
            spot.label,
            (spot.x, spot.y),
            xytext=(chosen.dx_pt, chosen.dy_pt),
            textcoords="offset points",
            ha=chosen.ha,
            va=chosen.va,
            **({"arrowprops": _LEADER} if chosen.leader else {}),
            **style,
        )
        box = text_box(label)
        self.avoid(box.padded(PAD_PX))
        if chosen.leader:
            self._avoid_leader(box, own)
        return label

    def _candidates(self, own: Bbox, width: float, height: float) -> Iterator[_Candidate]:
        """Positions of a ``width`` x ``height`` label of the marker ``own``: on the rings,
        then on a grid over the frame, each nearest first."""
        cx, cy = _centre(own)
        per_pt = self.axes.figure.dpi / 72
        frame = self.frame
        grid = [
            ((x - cx) / per_pt, (y - cy) / per_pt)
            for x in numpy.arange(frame.x0, frame.x1, _GRID_PX)
            for y in numpy.arange(frame.y0, frame.y1, _GRID_PX)
        ]
        grid.sort(key=lambda offset: math.hypot(*offset))
        for dx, dy in itertools.chain(_ring_offsets(), grid):
            ha, va = _alignment(dx, dy)
            x0 = cx + dx * per_pt - {"left": 0.0, "center": width / 2, "right": width}[ha]
            y0 = cy + dy * per_pt - {"bottom": 0.0, "center": height / 2, "top": height}[va]
            box = Bbox.from_bounds(x0, y0, width, height)
            yield _Candidate(dx, dy, ha, va, box, math.hypot(dx, dy) > _RADII_PT[0] + 0.5)

    def _penalty(self, candidate: _Candidate, own: Bbox) -> float:
        """A label right beside its marker must be clearly nearer to it than to any other (at
        most half as far, and 4 pixels nearer); a leader
        line must cross nothing taken (apart from the markers touching its own, which its end
        cannot help crossing)."""
        if not candidate.leader:
            others = (m for m in self.markers if m.bounds != own.bounds)
            nearest = min((_distance(candidate.box, m) for m in others), default=math.inf)
            return _AMBIGUOUS if nearest <= 2 * _distance(candidate.box, own) + 4 else 0.0
        points = numpy.array(self._leader_points(candidate.box, own)).reshape(-1, 2, 1)
        taken = self._extents.T  # four rows: x0, y0, x1, y1
        inside = (taken[0] <= points[:, 0]) & (points[:, 0] <= taken[2])
        inside &= (taken[1] <= points[:, 1]) & (points[:, 1] <= taken[3])
        x0, y0, x1, y1 = own.padded(PAD_PX).extents
        apart = (taken[0] > x1) | (taken[2] < x0) | (taken[1] > y1) | (taken[3] < y0)
        return _AMBIGUOUS * int((inside.any(axis=0) & (apart | ~self._marker)).sum())

    @staticmethod
    def _leader_points(box: Bbox, own: Bbox) -> list[tuple[float, float]]:
        """Points along the leader from the label ``box`` to the marker ``own``, outside
        both, ``_LEADER_PIECE_PX`` apart."""
        (x0, y0), (x1, y1) = _centre(box), _centre(own)
        steps = max(int(math.hypot(x1 - x0, y1 - y0) / _LEADER_PIECE_PX), 1)
        points = ((x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps) for k in range(steps))
        return [p for p in points if not box.contains(*p) and not own.contains(*p)]

    def _avoid_leader(self, box: Bbox, own: Bbox) -> None:
        half = _LEADER_PIECE_PX / 2
        for x, y in self._leader_points(box, own):
            self.avoid(Bbox.from_extents(x - half, y - half, x + half, y + half))

    def label_all(self, **style: object) -> list[Annotation]:
        """Label every spot, the most crowded first."""
        order = sorted(range(len(self.spots)), key=lambda i: -self._neighbours(i))
        placed = {i: self.label(self.spots[i], **style) for i in order}
        return [placed[i] for i in range(len(self.spots))]

    def _neighbours(self, index: int, reach_px: float = 60.0) -> int:
        """How many other markers lie within ``reach_px`` of marker ``index``."""
        near = self.markers[index].padded(reach_px)
        return sum(overlap(near, m) > 0 for j, m in enumerate(self.markers) if j != index)
