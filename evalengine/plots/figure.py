"""The one way figures are made here: matplotlib (an optional extra, ``evalengine[plot]``) without a display."""

from evalengine.errors import EvalEngineError


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise EvalEngineError('plots need matplotlib: pip install "evalengine[plot]"') from exc
    return plt


def close(figure) -> None:
    """Release a figure made here: pyplot keeps every figure until it is closed."""
    pyplot().close(figure)


def figure_formats() -> dict:
    """The formats a figure is saved in, by file suffix (``png``, ``pdf``, ``svg``, …: matplotlib's Agg canvas)."""
    pyplot()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return FigureCanvasAgg.get_supported_filetypes()
