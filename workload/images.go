package workload

import (
	"errors"
	"fmt"

	"github.com/valyala/fastjson"
	"github.com/zeebo/xxh3"

	"github.com/mocker-sim/mocker/tokens"
)

// Images (multimodal requests). A trace row lists its images as
//
//	"images": [{"id": "cat.png", "tokens": 576}, {"id": 7, "width": 1024, "height": 768, "offset": 900}]
//
// id (a string or an integer) names the image: rows naming the same id carry the same image, whose hash
// (ImageKey) enters the hashes of the blocks it overlaps and keys the vision encoder's cache. Its size is
// tokens, or width and height in pixels, which make PixelTokens tokens. offset is the image's first token
// in the prompt; by default it follows the previous image (the first is at 0). The images' tokens are part
// of the row's input_length (they occupy KV like text): they must fit in the prompt, in order, without
// overlapping. The tokens at an image's span are the row's own (its hash ids' or its text's): what makes
// the blocks differ is the image's key.

// ImageToken is the placeholder token of a synthetic image's span (Qwen2-VL's <|image_pad|>), the same for
// every image as in vLLM: the image's identity is in the blocks' extra keys, not in its tokens.
const ImageToken = 151655

// DefaultImageTokens is the size of an image_url part of a trace's messages when none is given: a
// 336-pixel image in LLaVA-1.5's CLIP ViT-L/14, 24 × 24 patches.
const DefaultImageTokens = 576

// PatchPixels is the side, in pixels, of the square one image token covers: Qwen2-VL's and Qwen2.5-VL's
// vision encoder cuts 14-pixel patches and merges 2×2 of them into one token.
const PatchPixels = 28

// PixelTokens is the number of tokens of a width × height image: one per PatchPixels square, rounding
// each side up (no resizing).
func PixelTokens(width, height int) int {
	return ((width + PatchPixels - 1) / PatchPixels) * ((height + PatchPixels - 1) / PatchPixels)
}

// ImageKey is the hash of an image named id: its extra key in block hashes and its encoder-cache entry.
func ImageKey(id string) uint64 { return xxh3.HashStringSeed(id, tokens.Seed) }

// subFieldError is an error about a part of a field ("[1].tokens"), which the trace error's field names.
type subFieldError struct {
	sub string
	err error
}

func (e *subFieldError) Error() string { return e.sub + ": " + e.err.Error() }

// readImages reads a row's images array; offsets are checked against the prompt by checkImages.
func readImages(v *fastjson.Value) ([]tokens.Item, error) {
	a, err := v.Array()
	if err != nil {
		return nil, fmt.Errorf("want an array of images, got %s", v.Type())
	}
	items := make([]tokens.Item, 0, len(a))
	next := 0
	for i, im := range a {
		sub := func(member string, err error) error {
			return &subFieldError{sub: fmt.Sprintf("[%d]%s", i, member), err: err}
		}
		o, err := im.Object()
		if err != nil {
			return nil, sub("", fmt.Errorf("want an object, got %s", im.Type()))
		}
		var (
			id                       string
			hasID                    bool
			n, w, h, off             int
			hasN, hasW, hasH, hasOff bool
			bad                      error
		)
		o.Visit(func(k []byte, v *fastjson.Value) {
			if bad != nil {
				return
			}
			key := string(k)
			var err error
			switch key {
			case "id":
				id, err = stringOrInt(v)
				hasID = true
			case "tokens":
				n, err = positive(v)
				hasN = true
			case "width":
				w, err = positive(v)
				hasW = true
			case "height":
				h, err = positive(v)
				hasH = true
			case "offset":
				off, err = length(v)
				if err == nil && off < 0 {
					err = fmt.Errorf("must be >= 0, got %d", off)
				}
				hasOff = true
			default:
				err = errors.New("unknown field (want id, tokens, width, height, offset)")
			}
			if err != nil {
				bad = sub("."+key, err)
			}
		})
		switch {
		case bad != nil:
			return nil, bad
		case !hasID:
			return nil, sub(".id", errors.New("missing"))
		case hasN && (hasW || hasH):
			return nil, sub(".tokens", errors.New("give tokens or width and height, not both"))
		case !hasN && !(hasW && hasH):
			return nil, sub(".tokens", errors.New("missing (give tokens, or width and height)"))
		case !hasN:
			if n = PixelTokens(w, h); n > MaxTokens {
				return nil, sub(".width", fmt.Errorf("%d × %d pixels make %d tokens, more than %d", w, h, n, MaxTokens))
			}
		}
		if !hasOff {
			off = next
		}
		if off < next {
			return nil, sub(".offset", fmt.Errorf("%d is before the end of image %d (%d): images go in order, without overlapping", off, i-1, next))
		}
		if off > MaxTokens-n {
			return nil, sub(".offset", fmt.Errorf("%d + %d tokens is more than %d", off, n, MaxTokens))
		}
		items = append(items, tokens.Item{Key: ImageKey(id), Start: off, Len: n})
		next = off + n
	}
	return items, nil
}

// positive reads a whole number >= 1.
func positive(v *fastjson.Value) (int, error) {
	n, err := length(v)
	if err == nil && n < 1 {
		err = fmt.Errorf("must be >= 1, got %d", n)
	}
	return n, err
}

// checkImages checks that the images fit in a prompt of n tokens, naming the first that does not.
func checkImages(items []tokens.Item, n int) error {
	for i, it := range items {
		if it.Start+it.Len > n {
			return &subFieldError{sub: fmt.Sprintf("[%d]", i), err: fmt.Errorf("tokens [%d, %d) end past the prompt's %d tokens (input_length counts the images' tokens)", it.Start, it.Start+it.Len, n)}
		}
	}
	return nil
}

// syntheticImages gives a generated prompt its images: n images of size tokens each, right after its
// shared prefix (a system prompt, then the images, then the question), adding their tokens to its length.
// With a pool, each image is one of pool distinct images drawn uniformly; without, every image is its own.
func (g *synthetic) syntheticImages(r *Request) {
	n, size := g.o.ImagesPerRequest, g.o.ImageTokens
	if n == 0 {
		return
	}
	r.imageLen = int32(n * size) // at most MaxTokens (checked)
	r.Images = make([]tokens.Item, n)
	for k := range r.Images {
		id := uint64(g.o.ImagePool) + r.Key*uint64(n) + uint64(k) // past the pool's ids
		if g.o.ImagePool > 0 {
			id = uint64(g.imagePick.IntN(g.o.ImagePool))
		}
		r.Images[k] = tokens.Item{Key: mix64(g.imageSeed + (id+1)*golden), Start: int(r.prefixLen) + k*size, Len: size}
	}
	r.InputLen = min(r.InputLen, MaxTokens-int(r.imageLen)) + int(r.imageLen)
}

// checkImages validates the synthetic image options.
func (o *SyntheticOptions) checkImages() error {
	switch {
	case o.ImagesPerRequest < 0:
		return fmt.Errorf("images-per-request: must be >= 0, got %d", o.ImagesPerRequest)
	case o.ImagesPerRequest == 0 && o.ImagePool != 0:
		return errors.New("image-pool: needs images-per-request >= 1")
	case o.ImagesPerRequest == 0 && o.ImageTokens != 0:
		return errors.New("image-tokens: needs images-per-request >= 1")
	case o.ImagesPerRequest == 0:
		return nil
	case o.ImageTokens < 1:
		return fmt.Errorf("image-tokens: must be >= 1 with images, got %d", o.ImageTokens)
	case o.ImagePool < 0:
		return fmt.Errorf("image-pool: must be >= 0, got %d", o.ImagePool)
	case o.ImageTokens > MaxTokens/2/o.ImagesPerRequest:
		return fmt.Errorf("image-tokens: %d images of %d tokens are more than %d tokens", o.ImagesPerRequest, o.ImageTokens, MaxTokens/2)
	case o.TurnsPerSession > 1:
		return errors.New("images-per-request: images do not combine with turns-per-session > 1 yet")
	}
	return nil
}
