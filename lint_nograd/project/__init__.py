"""The whole project: each file reduced to a summary (plain data, cached), and the linker that
joins the summaries into one call graph and finds what every transform and tracer reaches.

May import `analysis/`.
"""
