"""The command line, `skill-evals` (and `python -m runner`): parses options, calls the stages, prints.

app.py is the command group; each command lives in the module of its group (floor, planning, running with
incontainer, reporting, calibrating, improving) and is added to the group here, so that `runner.cli.main` is the
whole command line. options.py declares every option once, environment.py the variables each command's help lists,
context.py makes what a command starts from (settings, library, credentials, selection, floor), printing.py and
folders.py what a person reads.
"""

from runner.cli import calibrating, floor, hostsgroup, improving, planning, reporting, running
from runner.cli.app import main

for _command in (floor.validate, floor.census, floor.surface, planning.select_command, planning.plan, running.run,
                 running.route, running.judge_command, running.merge, reporting.report, reporting.publish,
                 calibrating.calibrate_judge, calibrating.calibrate, improving.improve_command, hostsgroup.hosts):
    main.add_command(_command)

__all__ = ["main"]
