package schedtest

import "github.com/mocker-sim/mocker/tokens"

// CountingSource is a prompt source (sched.PromptSource) that counts how often its prompt is made.
type CountingSource struct {
	Toks  []uint32
	Calls int
}

// PromptLen is the prompt's length.
func (c *CountingSource) PromptLen() int { return len(c.Toks) }

// AppendSequence appends the prompt to seq and counts the call.
func (c *CountingSource) AppendSequence(seq *tokens.Sequence) {
	c.Calls++
	seq.Append(c.Toks...)
}
