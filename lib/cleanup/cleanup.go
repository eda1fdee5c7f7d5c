// Package cleanup remembers the temporary files and directories a tool is
// writing, so that an interrupted tool (SIGINT, SIGTERM) or one that hit a
// bug removes them before it exits instead of leaving hidden partial files
// beside its outputs.
package cleanup

import (
	"os"
	"sort"
	"sync"
)

var (
	mu    sync.Mutex
	next  int
	paths = map[int]string{}
)

// Add registers a temporary path (a file, or a directory removed with its
// contents); the returned function forgets it again, after the path was
// renamed into place or removed by its owner. It is safe to call twice.
func Add(path string) (forget func()) {
	mu.Lock()
	defer mu.Unlock()
	next++
	id := next
	paths[id] = path
	return func() {
		mu.Lock()
		delete(paths, id)
		mu.Unlock()
	}
}

// RemoveAll removes every registered path (newest first) and returns how
// many existed.
func RemoveAll() int {
	mu.Lock()
	defer mu.Unlock()
	ids := make([]int, 0, len(paths))
	for id := range paths {
		ids = append(ids, id)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ids)))
	n := 0
	for _, id := range ids {
		if _, err := os.Lstat(paths[id]); err == nil {
			n++
		}
		os.RemoveAll(paths[id])
		delete(paths, id)
	}
	return n
}

// Pending returns the registered paths, oldest first (for tests).
func Pending() []string {
	mu.Lock()
	defer mu.Unlock()
	ids := make([]int, 0, len(paths))
	for id := range paths {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = paths[id]
	}
	return out
}
