"""Activities: every piece of I/O an agent does (model calls, tools, undo). Never imports workflows."""
