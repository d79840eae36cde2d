//! Checks of the workspace as a whole: its module graph.

mod module_graph;
