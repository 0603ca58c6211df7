"""Layer `report`: what a person looks at after a replay — the HTML report with its plots and CSVs
(`simulate --report DIR`), and the progress shown while a long command runs.

`series` turns replays into rows and series (no plotting library), `plots` draws them with matplotlib (the
optional extra `volcano-py[report]`), `page` writes the one self-contained HTML file, `progress` reports how far
a run has got. Above `sim`, beside the day-two commands; nothing below imports it.
"""
