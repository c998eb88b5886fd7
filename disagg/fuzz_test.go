package disagg

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// FuzzBootstrapReader sends a fresh room's first prefix bytes of id, then data, to a bootstrap server.
// Exactly the room id is acknowledged once the room completes; the room id followed by anything fails
// the room without an acknowledgement; anything else is closed without a word and leaves the room be.
func FuzzBootstrapReader(f *testing.F) {
	f.Add(uint8(16), []byte{})
	f.Add(uint8(16), []byte{0})
	f.Add(uint8(0), []byte{1, 2, 3, 4, 5, 6, 7, 8})            // Dynamo's 8-byte room id
	f.Add(uint8(8), []byte{})                                  // half a room id
	f.Add(uint8(15), []byte{0xff})                             // a room id with its last byte wrong
	f.Add(uint8(0), bytes.Repeat([]byte{0x01}, 64<<10))        // 64 KiB of garbage
	f.Add(uint8(16), bytes.Repeat([]byte("\x01\x00"), 32<<10)) // the room, then 64 KiB
	s, err := ListenBootstrap("127.0.0.1:0", BootstrapOptions{Timeout: time.Hour, MaxConns: 64})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, prefix uint8, data []byte) {
		room, err := s.NewRoom()
		if err != nil {
			t.Fatal(err)
		}
		defer s.CancelRoom(room)
		payload := append(append([]byte(nil), room[:min(int(prefix), RoomLen)]...), data...)
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		named := len(payload) >= RoomLen && [RoomLen]byte(payload) == room
		exact := named && len(payload) == RoomLen
		go func() {
			// The server stops reading after a room id that is not the room: the write may fail.
			c.Write(payload)
			if !exact {
				c.(*net.TCPConn).CloseWrite() // a short id ends here rather than at the id timeout
			}
		}()
		if exact {
			if err := s.WaitForDecodeReady(context.Background(), room); err != nil {
				t.Fatal(err)
			}
			if err := s.CompleteRoom(room); err != nil {
				t.Fatal(err)
			}
		}
		got, err := io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the server kept the connection open")
		}
		if want := map[bool]string{true: "\x01"}[exact]; string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
		if exact {
			return
		}
		// The room failed if the connection named it; otherwise it waits on, without a decode side.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			s.mu.Lock()
			r := s.rooms[room]
			s.mu.Unlock()
			if !named && (r == nil || r.decode) {
				t.Fatalf("a connection not naming the room changed it: %+v", r)
			}
			if r == nil || !named {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the room outlived its decode connection")
			}
		}
	})
}
