// Command pause is the sandbox container of the test bed's node (containerd's sandbox_image):
// it holds a pod's namespaces open, reaps the orphans it inherits as PID 1, and exits 0 on
// SIGINT or SIGTERM. It has no other behaviour, like Kubernetes' own pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
