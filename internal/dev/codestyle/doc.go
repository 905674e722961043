// Package codestyle holds tests of the code rules of STYLE.md that a
// parser can check over the whole module: no function or method takes
// more than five parameters (shared dependencies and a run's facts go in
// a struct, as the engine's run does).
package codestyle
