"""One widget per module; nothing here runs jobs or touches the engine's state."""
