"""Layer `framework`: extension points, session, statement, plugin base and the scheduler conf."""
