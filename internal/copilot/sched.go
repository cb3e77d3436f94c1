package copilot

import "runtime"

func runtimeGosched() { runtime.Gosched() }
