//! Checks of the workspace as a whole: its module graph and the paths its design cites.

mod design_paths;
mod module_graph;
