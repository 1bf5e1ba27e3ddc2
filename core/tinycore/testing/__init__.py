"""tinycore.testing: the backend conformance kit. Any backend runs the same op checks against numpy:

    pytest --pyargs tinycore.testing --device=NAME            (or: -p tinycore.testing.plugin)

Tests use the `helpers` module here (`check`, `rand`) to compare value, shape and dtype with numpy."""
