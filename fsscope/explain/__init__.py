"""Read file-system geometry, predict where structures change, explain measured flags.

``read_geometry`` -> ``predict`` -> ``explain``: see geometry.py, rules.py and match.py.
No UI imports here (neither textual nor rich).
"""

from fsscope.explain.geometry import Geometry, read_geometry
from fsscope.explain.match import Explanation, explain, unobserved
from fsscope.explain.rules import OP_RULES, Prediction, limits, predict

__all__ = ["Geometry", "read_geometry", "Prediction", "predict", "limits", "OP_RULES",
           "Explanation", "explain", "unobserved"]
