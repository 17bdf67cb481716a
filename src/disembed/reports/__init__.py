"""Tables, plots and report pages rendered from results."""
