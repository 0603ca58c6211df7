"""Layer `plugins`: one module per plugin name; `registry.PLUGINS` lists the built-ins explicitly."""
