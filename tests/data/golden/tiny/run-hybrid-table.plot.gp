# offsim plots: feed to gnuplot (5.2 or later), e.g. `gnuplot FILE`.
set encoding utf8

# ---- memory
$memory0 << EOD
0 1 0
0 1.0234375 0
0 1.0546875 0
0 1.1171875 0
2 1.0546875 0
2 1.078125 0
2 1.109375 0
2 1.171875 0
4 1.109375 0
4 1.109375 0.0234375
4 1.1328125 0.0234375
4 1.1640625 0.0234375
4 1.2265625 0.0234375
4.465560436 1.203125 0.0234375
4.465560436 1.203125 0.0546875
5.083641018 1.171875 0.0546875
6.032509231 1.109375 0.0546875
6.032509231 1.109375 0.078125
6.032509231 1.1171875 0.078125
6.032509231 1.1796875 0.078125
6.498069667 1.15625 0.078125
6.498069667 1.15625 0.109375
7.116150249 1.125 0.109375
9.065018461 1.0625 0.109375
9.065018461 1.0859375 0.109375
9.065018461 1.109375 0.109375
9.065018461 1.140625 0.109375
9.065018461 1.203125 0.109375
9.530578897 1.203125 0.0859375
9.530578897 1.234375 0.0859375
10.14865948 1.234375 0.0546875
12.09752769 1.171875 0.0546875
12.09752769 1.234375 0.0546875
16.09752769 1.171875 0.0546875
16.09752769 1.1484375 0.0546875
16.09752769 1.1171875 0.0546875
16.09752769 1.109375 0.0546875
16.09752769 1.1328125 0.0546875
16.09752769 1.1953125 0.0546875
16.56308813 1.1953125 0.03125
16.56308813 1.2265625 0.03125
17.18116871 1.2265625 0
20.13003692 1.1640625 0
20.13003692 1.140625 0
20.13003692 1.109375 0
20.13003692 1.171875 0
24.13003692 1.109375 0
24.13003692 1.0859375 0
24.13003692 1.0546875 0
24.13003692 1.1171875 0
28.13003692 1.0546875 0
28.13003692 1.03125 0
28.13003692 1 0
28.13003692 1 0
EOD
$peaks << EOD
9.530578897 1.234375 1
EOD
set terminal pngcairo size 1400,779 font 'sans,10' noenhanced background rgb 'white'
set output 'memory.png'
reset
set multiplot title 'tiny uniform model' . "\n" . 'device and host memory over the step' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 1.5
set lmargin at screen 0.07
set rmargin at screen 0.80
set grid lc rgb '#d0d0d0'
set key outside right top reverse Left
set xrange [0:28.13003692]
set tmargin at screen 0.9101412067
set bmargin at screen 0.4223363286
set ylabel 'device memory (GiB)'
set format x ''
set yrange [0.95:1.284375]
plot $memory0 using 1:2 with steps lt 1 title 'hybrid', \
     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \
     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'
unset arrow 1
unset key
set format x '%g'
set tmargin at screen 0.3645699615
set bmargin at screen 0.1720154044
set ylabel 'host pinned (GiB)'
set xlabel 'time since the step started (ms)'
set yrange [0:0.1203125]
set label 1 'device capacity 80.0 GiB, far above every peak: not drawn, to keep the curves apart' at screen 0.07, screen 0.09499358151 left
set label 2 'hybrid: device peak 1.23 GiB at 9.53 ms (reload L2 mlp), host peak 112 MiB' at screen 0.07, screen 0.07188703466 left tc rgb '#4e79a7'
set label 3 '    live at the device peak: static 1.00 GiB + saved 3 of L0-L3 168 MiB + workspace L3 64.0 MiB + input L3 8.00 MiB' at screen 0.07, screen 0.0487804878 left tc rgb '#4e79a7'
plot $memory0 using 1:3 with steps lt 1 notitle 
unset multiplot
unset output
set terminal svg size 1400,779 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'memory.svg'
reset
set multiplot title 'tiny uniform model' . "\n" . 'device and host memory over the step' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 1.5
set lmargin at screen 0.07
set rmargin at screen 0.80
set grid lc rgb '#d0d0d0'
set key outside right top reverse Left
set xrange [0:28.13003692]
set tmargin at screen 0.9101412067
set bmargin at screen 0.4223363286
set ylabel 'device memory (GiB)'
set format x ''
set yrange [0.95:1.284375]
plot $memory0 using 1:2 with steps lt 1 title 'hybrid', \
     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \
     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'
unset arrow 1
unset key
set format x '%g'
set tmargin at screen 0.3645699615
set bmargin at screen 0.1720154044
set ylabel 'host pinned (GiB)'
set xlabel 'time since the step started (ms)'
set yrange [0:0.1203125]
set label 1 'device capacity 80.0 GiB, far above every peak: not drawn, to keep the curves apart' at screen 0.07, screen 0.09499358151 left
set label 2 'hybrid: device peak 1.23 GiB at 9.53 ms (reload L2 mlp), host peak 112 MiB' at screen 0.07, screen 0.07188703466 left tc rgb '#4e79a7'
set label 3 '    live at the device peak: static 1.00 GiB + saved 3 of L0-L3 168 MiB + workspace L3 64.0 MiB + input L3 8.00 MiB' at screen 0.07, screen 0.0487804878 left tc rgb '#4e79a7'
plot $memory0 using 1:3 with steps lt 1 notitle 
unset multiplot
unset output

# ---- timeline-hybrid
$spans << EOD
0 2 2 0
2 4 2 0
4 4.465560436 1 3
4.465560436 5.083641018 1 3
4 6.032509231 2 0
6.032509231 6.498069667 1 3
6.498069667 7.116150249 1 3
6.032509231 9.065018461 2 0
9.065018461 9.530578897 0 4
9.530578897 10.14865948 0 4
9.065018461 12.09752769 2 2
12.09752769 16.09752769 2 1
16.09752769 16.56308813 0 4
16.56308813 17.18116871 0 4
16.09752769 20.13003692 2 1
20.13003692 24.13003692 2 1
24.13003692 28.13003692 2 1
EOD
set terminal pngcairo size 1400,340 font 'sans,10' noenhanced background rgb 'white'
set output 'timeline-hybrid.png'
reset
set title 'tiny uniform model' . "\n" . 'timeline of hybrid: step 28.13 ms = compute 25.00 + recompute 3.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.13' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:28.13003692]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9.065018461, graph 0 to 9.065018461, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9.065018461, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute', \
     $spans using (($4==3)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#a9631e' lw 0.5 lc rgb '#f28e2b' title 'D2H copy', \
     $spans using (($4==4)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#108590' lw 0.5 lc rgb '#17becf' title 'H2D copy'
unset output
set terminal svg size 1400,340 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'timeline-hybrid.svg'
reset
set title 'tiny uniform model' . "\n" . 'timeline of hybrid: step 28.13 ms = compute 25.00 + recompute 3.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.13' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:28.13003692]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9.065018461, graph 0 to 9.065018461, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9.065018461, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute', \
     $spans using (($4==3)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#a9631e' lw 0.5 lc rgb '#f28e2b' title 'D2H copy', \
     $spans using (($4==4)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#108590' lw 0.5 lc rgb '#17becf' title 'H2D copy'
unset output
