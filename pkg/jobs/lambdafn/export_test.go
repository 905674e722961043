package lambdafn

// FunctionNamed is Any's lookup of JOBS_FUNCTION, for the tests.
var FunctionNamed = functionNamed
