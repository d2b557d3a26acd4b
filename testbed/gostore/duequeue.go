package main

import "time"

// dued is an answer with the time it may be written (its arrival plus the profile's latency).
type dued interface {
	dueAt() time.Time
}

// dueHeap holds answers by the time each is due, the earliest first: the queue of both front ends. Its zero value
// is empty and ready; it is not safe for concurrent use (its owner locks it, or owns it alone).
type dueHeap[T dued] struct {
	items []T
}

func (h *dueHeap[T]) Len() int { return len(h.items) }

// peek is the earliest answer (the heap must not be empty).
func (h *dueHeap[T]) peek() T { return h.items[0] }

func (h *dueHeap[T]) push(item T) {
	h.items = append(h.items, item)
	for i := len(h.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.items[i].dueAt().Before(h.items[parent].dueAt()) {
			return
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

// pop removes and returns the earliest answer (the heap must not be empty).
func (h *dueHeap[T]) pop() T {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	for i := 0; ; {
		smallest, left, right := i, 2*i+1, 2*i+2
		if left < last && h.items[left].dueAt().Before(h.items[smallest].dueAt()) {
			smallest = left
		}
		if right < last && h.items[right].dueAt().Before(h.items[smallest].dueAt()) {
			smallest = right
		}
		if smallest == i {
			return top
		}
		h.items[i], h.items[smallest] = h.items[smallest], h.items[i]
		i = smallest
	}
}
