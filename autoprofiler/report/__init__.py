"""Tables, plots and pictures of results."""
