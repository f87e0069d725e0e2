"""The Grafana dashboard drawn without Grafana: each panel's queries, run on a real Prometheus.

Grafana cannot be had here (its server's Go module is AGPL and marked not-to-use in this
project's package lists; npm has its libraries, not the built application; Debian has no
package). So the chart's dashboard JSON is read as it
is, every panel's and annotation's PromQL is sent to Prometheus' ``query_range`` API with the
dashboard's variables filled in, and the answers are drawn with matplotlib in the panels' own
grid positions (24 columns, as Grafana lays them out). Time series panels become line charts,
stat panels their last value, annotations vertical lines. It is a faithful picture of what the
queries return, not of Grafana's look; the PNG says so in its title.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spark_dlq_devtools.prometheus import Prometheus

#: Grafana's grid: 24 columns; a row unit is 30 px. The figure keeps those proportions.
COLUMNS = 24
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
COLOURS = ["#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#f2495c", "#b877d9", "#8ab8ff", "#fade2a"]
ANNOTATION_COLOURS = {"red": "#f2495c", "orange": "#ff9830"}


def fill(expr: str, variables: Mapping[str, str]) -> str:
    for name, value in variables.items():
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    return expr


def legend(template: str, labels: Mapping[str, str]) -> str:
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template or "")
    return text or json.dumps(dict(labels))


def fmt(value: float, unit: str) -> str:
    if value is None or math.isnan(value):
        return "-"
    if unit == "percentunit":
        return f"{value * 100:.0f}%"
    if unit == "s":
        if value >= 3600:
            return f"{value / 3600:.1f} h"
        if value >= 60:
            return f"{value / 60:.1f} min"
        if value >= 1:
            return f"{value:.1f} s"
        return f"{value * 1000:.0f} ms"
    if unit == "ops":
        return f"{value:.2f}/s" if value < 10 else f"{value:.0f}/s"
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2f}"


def render(
    prometheus: Prometheus,
    dashboard: Mapping[str, Any],
    out: Path,
    *,
    variables: Mapping[str, str],
    start: float,
    end: float,
    note: str = "",
) -> Path:
    """Draw ``dashboard`` for ``start``..``end`` (Unix seconds) into the PNG ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter

    panels = list(dashboard["panels"])
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    header = 2.2  # grid units above the panels for the title
    width_in, unit_in = 22.0, 0.30
    height_in = (rows + header) * unit_in
    fig = plt.figure(figsize=(width_in, height_in), facecolor=BACKGROUND)
    step = max(1.0, (end - start) / 240)
    annotations = _annotations(prometheus, dashboard, variables, start, end, step)

    def box(grid: Mapping[str, int]) -> tuple[float, float, float, float]:
        x = grid["x"] / COLUMNS
        w = grid["w"] / COLUMNS
        top = 1 - (grid["y"] + header) / (rows + header)
        h = grid["h"] / (rows + header)
        return x, top - h, w, h

    title = dashboard.get("title", "")
    when = (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime(start))
        + " - "
        + time.strftime("%H:%M UTC", time.gmtime(end))
    )
    fig.text(
        0.005,
        1 - 0.6 / (rows + header),
        f"{title}    policy = {variables.get('policy', '')}    {when}",
        color=TEXT,
        fontsize=15,
        fontweight="bold",
        va="top",
    )
    fig.text(
        0.005,
        1 - 1.45 / (rows + header),
        "Drawn by spark_dlq_devtools.dashboard (matplotlib) from the dashboard JSON's own queries on a real "
        "Prometheus: not Grafana." + (f"  {note}" if note else ""),
        color="#8e8e8e",
        fontsize=10,
        va="top",
    )
    for panel in panels:
        x, y, w, h = box(panel["gridPos"])
        if panel["type"] == "row":
            fig.text(
                x + 0.003, y + h / 2, panel["title"], color=TEXT, fontsize=12, fontweight="bold", va="center"
            )
            continue
        pad_x, pad_y = 0.004, 0.01
        ax = fig.add_axes((x + pad_x + 0.018, y + pad_y + 0.012, w - 2 * pad_x - 0.022, h - 2 * pad_y - 0.03))
        ax.set_facecolor(PANEL)
        fig.patches.append(
            Rectangle(
                (x + pad_x / 2, y + pad_y / 2),
                w - pad_x,
                h - pad_y,
                transform=fig.transFigure,
                facecolor=PANEL,
                edgecolor=GRID,
                zorder=-1,
            )
        )
        fig.text(
            x + pad_x + 0.004,
            y + h - pad_y - 0.002,
            panel["title"],
            color=TEXT,
            fontsize=10.5,
            fontweight="bold",
            va="top",
        )
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        series = []
        for target in panel.get("targets", []):
            expr = fill(target["expr"], variables)
            if target.get("instant"):  # one value, at the end of the range (as Grafana asks it)
                answers = [
                    {"metric": r["metric"], "values": [r["value"]]} for r in prometheus.query(expr, at=end)
                ]
            else:
                answers = prometheus.query_range(expr, start=start, end=end, step=step)
            for result in answers:
                points = [(float(t), float(v)) for t, v in result["values"]]
                series.append((legend(target.get("legendFormat", ""), result["metric"]), points))
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.tick_params(colors="#9fa3a8", labelsize=8)
        if panel["type"] == "stat":
            ax.set_xticks([])
            ax.set_yticks([])
            shown = [(name, pts[-1][1]) for name, pts in series if pts] or [("", float("nan"))]
            for i, (name, value) in enumerate(shown[:4]):
                ax.text(
                    0.5,
                    0.62 - i * 0.3,
                    fmt(value, unit),
                    color=COLOURS[i % len(COLOURS)],
                    fontsize=26,
                    fontweight="bold",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                )
                if len(shown) > 1 or name:
                    ax.text(
                        0.5, 0.42 - i * 0.3, name, color=TEXT, fontsize=9, ha="center", transform=ax.transAxes
                    )
            continue
        from datetime import UTC, datetime

        # matplotlib's stubs type axis positions as numbers; its date units take datetimes.
        for i, (name, points) in enumerate(series):
            seconds, ys = _with_gaps(points, step)
            xs = [datetime.fromtimestamp(t, UTC) for t in seconds]
            colour = COLOURS[i % len(COLOURS)]
            ax.plot(xs, ys, color=colour, linewidth=1.4, label=name)  # type: ignore[arg-type]
            ax.fill_between(xs, ys, color=colour, alpha=0.08)  # type: ignore[arg-type]
        for when_s, colour in annotations:
            ax.axvline(
                datetime.fromtimestamp(when_s, UTC),  # type: ignore[arg-type]
                color=colour,
                linewidth=1.0,
                linestyle="--",
                alpha=0.9,
            )
        ax.set_xlim(
            datetime.fromtimestamp(start, UTC),  # type: ignore[arg-type]
            datetime.fromtimestamp(end, UTC),  # type: ignore[arg-type]
        )
        # matplotlib.dates has no type hints.
        if end - start <= 1800:
            locator = mdates.MinuteLocator(interval=max(1, int((end - start) // 360)))  # type: ignore[no-untyped-call]
            ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p, u=unit: fmt(v, u)))
        ax.grid(color=GRID, linewidth=0.6)
        ax.set_ylim(bottom=0)
        if not series:
            ax.text(0.5, 0.5, "No data", color="#8e8e8e", ha="center", va="center", transform=ax.transAxes)
        elif len(series) <= 8:
            ax.legend(
                loc="upper left",
                fontsize=7.5,
                facecolor=PANEL,
                edgecolor=GRID,
                labelcolor=TEXT,
                framealpha=0.8,
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80, facecolor=BACKGROUND)
    plt.close(fig)
    return out


def _with_gaps(points: Sequence[tuple[float, float]], step: float) -> tuple[list[float], list[float]]:
    """The points, with a NaN where a series has no sample for longer than two steps (a
    restarted target), so the line breaks there as Grafana's does instead of bridging it."""
    xs: list[float] = []
    ys: list[float] = []
    for t, v in points:
        if xs and t - xs[-1] > 2 * step:
            xs.append(xs[-1] + step)
            ys.append(float("nan"))
        xs.append(t)
        ys.append(v)
    return xs, ys


def _annotations(
    prometheus: Prometheus,
    dashboard: Mapping[str, Any],
    variables: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> list[tuple[float, str]]:
    """The times where an annotation query turns non-empty (the start of each run of points)."""
    marks: list[tuple[float, str]] = []
    for annotation in dashboard.get("annotations", {}).get("list", []):
        colour = ANNOTATION_COLOURS.get(annotation.get("iconColor", ""), "#ff9830")
        for result in prometheus.query_range(
            fill(annotation["expr"], variables), start=start, end=end, step=step
        ):
            previous: float | None = None
            for t, _ in result["values"]:
                if previous is None or float(t) - previous > 2 * step:
                    marks.append((float(t), colour))
                previous = float(t)
    return marks


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def panel_exprs(dashboard: Mapping[str, Any]) -> Sequence[str]:
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    return exprs + [a["expr"] for a in dashboard.get("annotations", {}).get("list", [])]
