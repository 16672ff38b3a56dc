"""Reading torch.profiler / Kineto traces of real GPUs and analyzing them.

One loader (:mod:`.reader`: a file into typed columns, :mod:`.events`) and one analysis per
module (timeline, ops, collectives, what-if), each a pure function over the columns. No module
here imports torch; pandas only where a DataFrame is handed to an API user.
"""
