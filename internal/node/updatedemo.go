package node

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"maps"
	"math"
)

// updateDemoImage is one of upstream's update-demo images (nautilus,
// kitten), which kubectl's e2e tests run in a ReplicationController: the
// agnhost image with its picture /<name>.jpg and /data.json naming it,
// served by test-webserver. The picture, painted by paint, is svcnet's
// own; data.json is upstream's, byte for byte.
func updateDemoImage(agnhost Image, name string, paint func(x, y float64) color.RGBA) Image {
	img := agnhost
	img.Cmd = []string{"test-webserver"}
	img.Files = maps.Clone(agnhost.Files)
	img.Files["/data.json"] = fmt.Sprintf("{\n  \"image\": \"%s.jpg\"\n}\n", name)
	img.Files["/"+name+".jpg"] = drawJPEG(paint)
	return img
}

// drawJPEG is a small square JPEG picture with the colour paint gives each
// point, from (-1, -1) at the top left to (1, 1). The same paint always
// encodes to the same bytes.
func drawJPEG(paint func(x, y float64) color.RGBA) string {
	const size = 96
	pic := image.NewRGBA(image.Rect(0, 0, size, size))
	for py := range size {
		for px := range size {
			pic.SetRGBA(px, py, paint(2*(float64(px)+0.5)/size-1, 2*(float64(py)+0.5)/size-1))
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, pic, nil); err != nil {
		// Only a failed write fails, and a bytes.Buffer takes all.
		panic(fmt.Sprintf("encode a JPEG in memory: %v", err))
	}
	return b.String()
}

// paintNautilus paints a nautilus's shell on the sea: a logarithmic spiral,
// its whorls apart by thin seams.
func paintNautilus(x, y float64) color.RGBA {
	const growth = 0.18 // the radius grows e^(2π·growth) ≈ 3.1 times a turn
	shell, sea := color.RGBA{R: 0xf2, G: 0xe6, B: 0xd0, A: 0xff}, color.RGBA{R: 0x1f, G: 0x4e, B: 0x79, A: 0xff}
	r := math.Hypot(x, y)
	if r > 0.9 || r < 0.03 {
		return sea
	}
	turns := (math.Log(r)/growth - math.Atan2(y, x)) / (2 * math.Pi)
	if turns-math.Floor(turns) < 0.85 {
		return shell
	}
	return sea
}

// paintKitten paints a ginger kitten's head, ears and (dark) eyes on grass.
func paintKitten(x, y float64) color.RGBA {
	fur, eye, grass := color.RGBA{R: 0xe8, G: 0x8b, B: 0x2e, A: 0xff}, color.RGBA{R: 0x20, G: 0x20, B: 0x20, A: 0xff}, color.RGBA{R: 0xd8, G: 0xf0, B: 0xd0, A: 0xff}
	ax := math.Abs(x) // the face is symmetric
	t := (y + 0.8) / 0.6
	switch {
	case math.Hypot(ax-0.25, y-0.05) < 0.09:
		return eye
	case math.Hypot(x, y-0.15) < 0.6:
		return fur
	case t >= 0 && t <= 1 && ax >= 0.5-0.35*t && ax <= 0.5+0.1*t:
		return fur // an ear: a triangle with its tip at (±0.5, -0.8)
	}
	return grass
}
