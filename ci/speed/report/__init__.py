"""What the speed gate says: markdown.py turns results and codes into words, write.py writes the Markdown, the
JSON record and the PNG (plot.py) of a run.
"""
