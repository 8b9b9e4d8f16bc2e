"""Physical layout: FIEMAP extents, fragments, d-span (Chopper), free-space histograms.

No UI imports here; everything returns numpy arrays or frozen dataclasses.
"""
