"""Runs the contract suite against one app: run.py NAME 'COMMAND TEMPLATE' [unittest args].

The template's placeholders: {app_port} {public_port} {sidecar_port} {state_dir} {event_log}
{pod}; the app serves the callbacks on 127.0.0.1:{app_port} and its public API on
{public_port}, and reaches its sidecar on 127.0.0.1:{sidecar_port}."""

import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, template = argv[0], argv[1]
    os.environ["KSHARD_CONTRACT_APP"] = template
    suite = unittest.defaultTestLoader.discover(here, pattern="test_contract.py", top_level_dir=here)
    print(f"== contract suite: {name}: {template}", flush=True)
    result = unittest.TextTestRunner(verbosity=2 if "-v" in argv[2:] else 1).run(suite)
    print(f"== contract suite: {name}: {result.testsRun} run, {len(result.failures)} failed, "
          f"{len(result.errors)} errors, {len(result.skipped)} skipped", flush=True)
    return 0 if result.wasSuccessful() and not result.skipped else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
