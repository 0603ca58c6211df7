"""Layer `ctl`: the day-two commands (`explain`, `job`, `queue`). Read what the scheduler and controllers
publish, and create `bus.volcano.sh` Commands as vcctl does; never write a status."""
