from holonograph.cli import main

main()
