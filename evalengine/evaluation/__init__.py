"""Evaluations by family: a matched run (store layout, run, protocol) whose metrics come back as Polars frames.

``detection`` (the COCO protocol), ``proposals`` (Hosang et al.'s recall protocols and repeatability); ``report``
renders them as the reference tools print them and as the command's JSON.
"""
