//go:build !linux

package main

// Where there is no epoll (not Linux), the event loop front end refuses to start: -frontend goroutines serves there.

import (
	"errors"
	"time"
)

type eventLoop struct {
	tick time.Duration
}

var errNoEpoll = errors.New("the epoll front end needs Linux: use -frontend goroutines")

func listenLoopback(port int) (int, int, error) { return -1, 0, errNoEpoll }

func newEventLoop(s *Server, lfd int) (*eventLoop, error) { return nil, errNoEpoll }

func (l *eventLoop) run() error { return errNoEpoll }
