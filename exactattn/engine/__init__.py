"""The engine room: both meanings of a batch of inputs and what is measured on them."""
